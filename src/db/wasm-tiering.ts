import { setFlagsFromString } from 'node:v8';

/**
 * PostgreSQL's WebAssembly starts on V8's baseline code, and V8 recompiles a function with its
 * optimising compiler once it has run a budget's worth of instructions: about 1.8 MB in Node 20's V8
 * (13 MB in later ones). PostgreSQL's start and its first queries spend that for hundreds of functions
 * at once, and the main thread then spent more time waiting on those compile jobs than running:
 * measured on 2 cores, 0.15 to 0.3 s of a start, and 0.2 to 0.4 s of CPU. With a budget of 100 MB only
 * the functions that stay hot are recompiled, a little later: queries ran as fast from the first
 * hundred on (600 inserts and reads took the same time in every batch after the first, and the first
 * was no slower). The budget is read when a module is compiled and instantiated: `twokey serve` sets
 * it first thing, before any WebAssembly is compiled (undici's HTTP parser too, whose hot functions
 * are likewise still recompiled), and opening an embedded database sets it before PGlite's module is
 * compiled. Never at import: a program that imports twokey's library keeps V8's settings unless it
 * asks for PGlite.
 */
export function raiseWasmTieringBudget(): void {
  setFlagsFromString('--wasm-tiering-budget=100000000');
}
