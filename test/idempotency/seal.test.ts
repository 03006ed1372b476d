import { describe, expect, it } from 'vitest';
import { seal, sealResponse, unseal } from '../../src/idempotency/seal.js';

describe('sealed responses', () => {
  const body = JSON.stringify({ id: 'prp_1', confirmToken: 'tk_conf_secret' });

  it('opens with the same API key and scope', () => {
    const sealed = seal(body, 'tk_agent_key', 'agt_1\u0000k1');
    expect(JSON.stringify(sealed)).not.toContain('tk_conf_secret');
    expect(unseal(sealed, 'tk_agent_key', 'agt_1\u0000k1')).toBe(body);
  });

  it('does not open with another API key, under another key, or once tampered with', () => {
    const sealed = seal(body, 'tk_agent_key', 'agt_1\u0000k1');
    expect(unseal(sealed, 'tk_agent_other', 'agt_1\u0000k1')).toBeNull();
    expect(unseal(sealed, 'tk_agent_key', 'agt_1\u0000k2')).toBeNull();
    const data = Buffer.from(sealed.data, 'base64');
    data[0] = (data[0] ?? 0) ^ 1;
    expect(unseal({ ...sealed, data: data.toString('base64') }, 'tk_agent_key', 'agt_1\u0000k1')).toBeNull();
    expect(unseal({ plain: body }, 'tk_agent_key', 'agt_1\u0000k1')).toBeNull();
  });

  it('seals a stored response under one key per API key, still bound to its scope; bodies sealed before still open', () => {
    const sealed = sealResponse(body, 'tk_agent_key', 'agt_1\u0000k1');
    expect(sealed.v).toBe(2);
    expect(JSON.stringify(sealed)).not.toContain('tk_conf_secret');
    expect(unseal(sealed, 'tk_agent_key', 'agt_1\u0000k1')).toBe(body);
    // The same API key, another scope: its own IV, and the body does not move.
    const other = sealResponse(body, 'tk_agent_key', 'agt_1\u0000k2');
    expect(other.iv).not.toBe(sealed.iv);
    expect(unseal(sealed, 'tk_agent_key', 'agt_1\u0000k2')).toBeNull();
    expect(unseal({ ...sealed, iv: other.iv, tag: other.tag, data: other.data }, 'tk_agent_key', 'agt_1\u0000k1')).toBeNull();
    expect(unseal(sealed, 'tk_agent_other', 'agt_1\u0000k1')).toBeNull();
    expect(unseal({ ...sealed, v: 1 }, 'tk_agent_key', 'agt_1\u0000k1')).toBeNull();
    expect(unseal(seal(body, 'tk_agent_key', 'agt_1\u0000k1'), 'tk_agent_key', 'agt_1\u0000k1')).toBe(body);
  });
});
