import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verifySlackSignature } from '../../src/slack/signature.js';

const secret = 'boundary-secret';
const body = Buffer.from('payload=%7B%22type%22%3A%22block_actions%22%7D');
const now = new Date('2026-11-22T10:00:00.000Z');
const nowSeconds = now.getTime() / 1000;

function sign(timestamp: number, raw: Buffer = body, key = secret): string {
  return `v0=${createHmac('sha256', key).update(`v0:${timestamp}:`).update(raw).digest('hex')}`;
}

const verify = (timestamp: number, signature = sign(timestamp)) =>
  verifySlackSignature({ signingSecret: secret, timestamp: String(timestamp), signature, rawBody: body, now });

describe('verifySlackSignature', () => {
  it('accepts a signature made now', () => {
    expect(verify(nowSeconds)).toBe('valid');
  });

  it('accepts 300 s off in both directions and refuses 301 s', () => {
    expect(verify(nowSeconds - 300)).toBe('valid');
    expect(verify(nowSeconds + 300)).toBe('valid');
    expect(verify(nowSeconds - 301)).toBe('stale');
    expect(verify(nowSeconds + 301)).toBe('stale');
  });

  it('refuses another secret, another body, and malformed or missing headers', () => {
    expect(verify(nowSeconds, sign(nowSeconds, body, 'other-secret'))).toBe('mismatch');
    expect(verify(nowSeconds, sign(nowSeconds, Buffer.from('payload=tampered')))).toBe('mismatch');
    expect(verify(nowSeconds, 'v1=abc')).toBe('malformed');
    expect(verifySlackSignature({ signingSecret: secret, timestamp: 'yesterday', signature: sign(nowSeconds), rawBody: body, now })).toBe('malformed');
    expect(verifySlackSignature({ signingSecret: secret, timestamp: undefined, signature: sign(nowSeconds), rawBody: body, now })).toBe('missing');
    expect(verifySlackSignature({ signingSecret: secret, timestamp: String(nowSeconds), signature: undefined, rawBody: body, now })).toBe('missing');
  });
});
