/**
 * `import … from 'twokey'`: what a program needs to run twokey inside itself. Everything else under
 * src/ is internal and may change between versions; the agent-side client is `@twokey/client`
 * (also `twokey/sdk`).
 */
export { startTwokey, type StartOptions, type RunningTwokey } from './runtime/server.js';
export { loadEnv, type Env, type LogLevel, type AgenrExecutePolicy } from './config/env.js';
export { parseConfig, loadConfigFile, resolveConfigPath, EXAMPLE_CONFIG_PATH, type TwokeyConfig, type OperationDefinition } from './config/config-file.js';
export { ConfigError } from './config/errors.js';
export { openDatabase, DataDirLockedError, type Database, type OpenOptions } from './db/database.js';
export { handleProcessFaults, type ProcessFaultOptions } from './runtime/process-faults.js';
export type { Executor, ExecutionRequest } from './core/executor.js';
export type { Clock, ProposalStatus } from './core/model.js';
export type { Outcome, OutcomeKind } from './core/outcome.js';
