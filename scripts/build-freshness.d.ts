export declare function newestInput(root: string, inputs: readonly string[]): number;
export declare function builtAt(dir: string): number;
export declare const CLIENT_INPUTS: readonly string[];
export declare const SERVER_INPUTS: readonly string[];
export declare function isFresh(root: string, dir: string, inputs: readonly string[]): boolean;
