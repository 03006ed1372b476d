import { describe, expect, it } from 'vitest';
import { seal, unseal } from '../../src/idempotency/seal.js';

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
});
