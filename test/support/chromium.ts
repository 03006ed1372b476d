import type { Browser, BrowserContext, Page } from 'playwright-core';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export interface ChromiumLaunch {
  executablePath: string;
  args: string[];
  /** Where it came from, for error messages and the test log. */
  source: string;
}

// Without the background-networking flags Chromium keeps dialling Google, which this machine refuses.
const QUIET_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function onPath(name: string): string | undefined {
  for (const folder of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(folder, name);
    if (folder && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/**
 * The Chromium the browser tests drive (Playwright never downloads one): `CHROMIUM_PATH`, else the
 * system's `chromium`, else the build that the npm package @sparticuz/chromium carries in its own
 * tarball (a devDependency), so `npm ci && npm test` needs no apt and no download.
 */
export async function findChromium(): Promise<ChromiumLaunch> {
  const configured = process.env.CHROMIUM_PATH;
  if (configured) {
    if (!existsSync(configured)) throw new Error(`CHROMIUM_PATH=${configured} does not exist`);
    return { executablePath: configured, args: QUIET_ARGS, source: 'CHROMIUM_PATH' };
  }
  const system = onPath('chromium');
  if (system) return { executablePath: system, args: QUIET_ARGS, source: `system (${system})` };
  const { default: packaged } = await import('@sparticuz/chromium');
  // Unpacks the brotli archives into the temp directory on first use; later calls reuse them.
  const executablePath = await packaged.executablePath();
  // Its own flags suit its headless-shell build, except --single-process (needed only inside AWS
  // Lambda's sandbox): with it, closing one page takes the whole browser down.
  const own = packaged.args.filter((arg) => arg !== '--single-process');
  const args = [...new Set([...own, ...QUIET_ARGS.filter((arg) => arg !== '--headless')])];
  return { executablePath, args, source: `@sparticuz/chromium (${executablePath})` };
}

/**
 * A page whose browser has a platform authenticator (Chromium's virtual one, over the DevTools
 * protocol): `navigator.credentials.create/get` succeed with user verification and no person.
 * WebAuthn needs a secure context: open the page on http://localhost (127.0.0.1 is no valid RP ID).
 */
export async function pageWithPasskeys(browser: Browser): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
  });
  return { context, page };
}
