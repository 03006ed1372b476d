import type { PasskeyView } from '../../passkeys/service.js';
import { html, type SafeHtml } from '../html.js';
import { formFields, timeTag, type Viewer } from '../layout.js';

/** The fields passkeys.js fills in before the form posts: the challenge's nonce and the browser's answer. */
export const passkeyAnswerFields = html`<input type="hidden" name="nonce" value="" /><input type="hidden" name="credential" value="" />`;

/** The signed-in person's passkeys, a way to add one, and a revoke button on each one in force. */
export function passkeysPage(passkeys: PasskeyView[], viewer: Viewer): SafeHtml {
  const active = passkeys.filter((passkey) => passkey.revokedAt === null);
  return html`<h1>Passkeys</h1>
    <p class="muted">
      Operations marked <code>stepUp: passkey</code> are approved here, with one of your passkeys: the passkey signs that one
      proposal's exact params. A click in Slack or Discord on such a proposal sends you here.
    </p>
    <form method="post" action="/console/passkeys" class="passkey-register" data-passkey="register" data-options="/console/passkeys/options">
      ${formFields(viewer)} ${passkeyAnswerFields}
      <label for="passkey-label">Name <span class="muted">(to tell your passkeys apart)</span></label>
      <input id="passkey-label" name="label" maxlength="64" placeholder="laptop" />
      <button type="submit" class="btn btn-primary">Add a passkey</button>
    </form>
    ${
      passkeys.length === 0
        ? html`<div class="empty"><p class="empty-title">You have no passkey yet.</p></div>`
        : html`<table class="table" id="passkeys">
            <thead>
              <tr><th>Name</th><th>Added</th><th>Last used</th><th>State</th><th></th></tr>
            </thead>
            <tbody>
              ${passkeys.map(
                (passkey) => html`<tr data-credential="${passkey.credentialId}">
                  <td>${passkey.label}</td>
                  <td>${timeTag(passkey.createdAt)}</td>
                  <td>${passkey.lastUsedAt ? timeTag(passkey.lastUsedAt) : html`<span class="muted">never</span>`}</td>
                  <td>${passkey.revokedAt ? html`revoked ${timeTag(passkey.revokedAt)}` : 'in force'}</td>
                  <td>
                    ${
                      passkey.revokedAt
                        ? ''
                        : html`<form method="post" action="/console/passkeys/${passkey.credentialId}/revoke" class="inline">
                            ${formFields(viewer)}
                            <button type="submit" class="btn btn-reject-outline btn-small">Revoke</button>
                          </form>`
                    }
                  </td>
                </tr>`,
              )}
            </tbody>
          </table>`
    }
    <p class="muted small">${active.length} passkey${active.length === 1 ? '' : 's'} in force.</p>`;
}
