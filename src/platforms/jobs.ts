import { coreJobSchemas, jobCatalogue, type JobPayloadSchemas } from '../core/jobs.js';
import { chatPlatformNames, chatPlatforms } from './index.js';

/**
 * The full job catalogue: the core's kinds (whose `platform` may name any registered platform) and
 * every platform's stored clicks, by their stored names.
 */
export const jobPayloadSchemas = {
  ...coreJobSchemas(chatPlatformNames),
  ...Object.assign({}, ...chatPlatforms.map((platform) => platform.clickJobs)),
} as JobPayloadSchemas;

/** The kinds of stored clicks, every platform's: they run in the `clicks` lane. */
export const clickJobKinds = chatPlatforms.flatMap((platform) => Object.keys(platform.clickJobs)) as Array<keyof typeof jobPayloadSchemas>;

export const { isJobKind, parseJob } = jobCatalogue(jobPayloadSchemas);
