/* global document, SimpleWebAuthnBrowser */
// twokey console: passkeys. A form marked `data-passkey` ("register" or "approve") first asks twokey
// for WebAuthn options (`data-options`), lets the browser create or use a passkey, puts the answer in
// the form's hidden `nonce` and `credential` fields, and then posts the form as usual. Without this
// file the form posts with no passkey answer, and twokey refuses it with the reason.
(function () {
  'use strict';

  function say(form, text) {
    var out = form.querySelector('.passkey-message');
    if (!out) {
      out = document.createElement('p');
      out.className = 'passkey-message why';
      out.setAttribute('role', 'alert');
      form.appendChild(out);
    }
    out.textContent = text;
  }

  async function optionsFor(form) {
    var body = new URLSearchParams({ _csrf: form.elements._csrf.value });
    var response = await fetch(form.getAttribute('data-options'), {
      method: 'POST',
      body: body,
      credentials: 'same-origin',
      headers: { accept: 'application/json' },
    });
    var answer = await response.json().catch(function () {
      return null;
    });
    if (!response.ok || !answer || !answer.options) {
      throw new Error(answer && answer.error ? answer.error : 'twokey did not give passkey options (HTTP ' + response.status + '). Reload and try again.');
    }
    return answer;
  }

  async function run(form, kind) {
    var button = form.querySelector('button[type="submit"]');
    if (button) button.disabled = true;
    try {
      var answer = await optionsFor(form);
      var credential =
        kind === 'register'
          ? await SimpleWebAuthnBrowser.startRegistration({ optionsJSON: answer.options })
          : await SimpleWebAuthnBrowser.startAuthentication({ optionsJSON: answer.options });
      form.elements.nonce.value = answer.nonce;
      form.elements.credential.value = JSON.stringify(credential);
      form.submit();
    } catch (error) {
      say(form, (error && error.message) || 'The passkey step did not complete.');
      if (button) button.disabled = false;
    }
  }

  // Delegated: live updates replace proposal cards, and their forms with them.
  document.addEventListener(
    'submit',
    function (event) {
      var form = event.target;
      var kind = form && form.getAttribute ? form.getAttribute('data-passkey') : null;
      if (!kind || typeof SimpleWebAuthnBrowser === 'undefined') return;
      event.preventDefault();
      run(form, kind);
    },
    true,
  );
})();
