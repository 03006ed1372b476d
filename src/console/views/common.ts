import { html, type HtmlValue, type SafeHtml } from '../html.js';
import { notice } from '../layout.js';

/** A refused action (HTTP 4xx): what happened, and a way back. */
export function refusedPage(title: string, message: HtmlValue, back: string): SafeHtml {
  return html`<div class="page-head"><h1>${title}</h1></div>
    ${notice('error', message)}
    <p><a class="btn btn-quiet" href="${back}">← Back</a></p>`;
}
