import { randomBytes } from 'node:crypto';
import type { Adapter, AdapterContext, AdapterTokenRedemption, ExecuteResult } from './types.js';
import { asRecord } from '../../lib/records.js';

/**
 * The AGP specification's Echo adapter: a fake shop for trying the two-step adapter-level
 * confirmation without any payment processor. Catalog, prices, tax rate and texts are those of the
 * reference implementation, so agents built against it get the same numbers (2 × 9.99 = 19.98,
 * tax 1.65, total 21.63).
 *
 * One deliberate difference: the reference accepts any token that starts with `echo-confirm-`, so
 * a token is reusable and not tied to the order. Here the token is a random secret stored hashed,
 * single-use, and bound to the agent, the business and the exact items it was issued for.
 */

const TAX_RATE = 0.0825;
const ORDER_TOKEN_TTL_MS = 5 * 60_000;

const CATALOG = [
  { id: 'echo-widget-1', name: 'Widget', price: 9.99, currency: 'USD' },
  { id: 'echo-widget-2', name: 'Gadget', price: 24.99, currency: 'USD' },
  { id: 'echo-sub-1', name: 'Pro Plan', price: 49.99, currency: 'USD', interval: 'month' },
] as const;

const DEFAULT_ITEM = { productId: 'echo-widget-1', quantity: 1 } as const;

interface OrderLine {
  productId: string;
  name: string;
  quantity: number;
  price: number;
}

export interface EchoOrderSummary {
  business: string;
  items: OrderLine[];
  subtotal: number;
  tax: number;
  total: number;
  currency: 'USD';
}

const failureTexts: Record<Exclude<AdapterTokenRedemption, { ok: true }>['reason'], string> = {
  invalid: 'Invalid confirmation token',
  consumed: 'Confirmation token already used. Please start a new order.',
  expired: 'Confirmation token expired. Please start a new order.',
  mismatch: 'Confirmation token does not match this order. Please start a new order.',
};

/** The reference's rule: a missing, zero or fractional quantity becomes a whole number of at least 1. */
function toQuantity(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.max(1, Math.floor(value)) : 1;
}

/** Cents as integers, so 19.98 × 8.25 % rounds the way a till does, not the way floats drift. */
const toCents = (dollars: number): number => Math.round(dollars * 100);
const toDollars = (cents: number): number => cents / 100;

export function priceEchoOrder(request: Record<string, unknown>): EchoOrderSummary | { error: string } {
  const rawItems = Array.isArray(request['items']) && request['items'].length > 0 ? request['items'] : [DEFAULT_ITEM];
  const lines: OrderLine[] = [];
  for (const raw of rawItems) {
    const item = asRecord(raw);
    if (!item) return { error: 'Each item must be an object like { "productId": "echo-widget-1", "quantity": 1 }' };
    const productId = typeof item['productId'] === 'string' ? item['productId'] : DEFAULT_ITEM.productId;
    const product = CATALOG.find((entry) => entry.id === productId);
    // The reference prices unknown products at a guess; a shop that charges for what it does not sell is worse.
    if (!product) return { error: `Unknown product '${productId}'` };
    lines.push({ productId, name: product.name, quantity: toQuantity(item['quantity']), price: product.price });
  }
  const subtotalCents = lines.reduce((sum, line) => sum + toCents(line.price) * line.quantity, 0);
  const taxCents = Math.round(subtotalCents * TAX_RATE);
  return {
    business: 'Echo Labs',
    items: lines,
    subtotal: toDollars(subtotalCents),
    tax: toDollars(taxCents),
    total: toDollars(subtotalCents + taxCents),
    currency: 'USD',
  };
}

/** What the order token is bound to: the products and quantities, whatever else the request holds. */
const orderBinding = (summary: EchoOrderSummary) => summary.items.map(({ productId, quantity }) => ({ productId, quantity }));

export function createEchoAdapter(): Adapter {
  return {
    async discover() {
      return {
        business: { name: 'Echo Labs', description: 'A test business for SDK experimentation.' },
        services: [
          { id: 'catalog', name: 'Product Catalog', description: 'Browse test products.' },
          { id: 'order', name: 'Place Order', description: 'Simulate a purchase transaction.', requiresConfirmation: true },
          { id: 'ping', name: 'Ping', description: 'Echo back any payload. Useful for testing request shapes.' },
        ],
        hints: {
          typicalFlow: 'query catalog -> pick products -> execute order -> user approves confirmation -> execute with token',
          queryParams: { catalog: { serviceId: 'catalog' }, ping: { serviceId: 'ping', options: { any: 'value' } } },
          executeParams: { order: { serviceId: 'order', items: [{ productId: 'echo-widget-1', quantity: 1 }] } },
          confirmationFlow:
            'Execute returns pending_confirmation with a confirmationToken and summary. Present the summary to the user. ' +
            'After approval, call execute again with the confirmationToken (and the same items) to complete.',
          simulationModes: {
            failure: "Pass simulate: 'failure' in execute to test error handling",
            expired: "Pass simulate: 'expired' to test expired confirmation tokens",
          },
        },
      };
    },

    async query(request) {
      if (request['serviceId'] === 'catalog') return { results: CATALOG };
      if (request['serviceId'] === 'ping') return { echo: request['options'] };
      return { results: [] };
    },

    async execute(params, _options, ctx: AdapterContext): Promise<ExecuteResult> {
      const request = asRecord(params['request']) ?? params;
      if (request['simulate'] === 'failure') return { status: 'failed', error: 'Simulated failure for testing' };
      if (request['simulate'] === 'expired') return { status: 'failed', error: failureTexts.expired };

      const summary = priceEchoOrder(request);
      if ('error' in summary) return { status: 'failed', error: summary.error };
      const presented = request['confirmationToken'];

      if (typeof presented !== 'string' || presented === '') {
        const issued = await ctx.tokens.mint(orderBinding(summary), { ttlMs: ORDER_TOKEN_TTL_MS, data: { total: summary.total } });
        return {
          status: 'pending_confirmation',
          confirmationType: 'payment',
          confirmationToken: issued.token,
          summary,
          message: 'Please confirm this order. Pass the confirmationToken back to execute to complete.',
          expiresIn: '5 minutes',
          expiresAt: issued.expiresAt.toISOString(),
        };
      }

      const now = ctx.clock();
      const orderId = `echo-order-${now.getTime()}-${randomBytes(4).toString('hex')}`;
      const receipt = { ...summary, paidAt: now.toISOString() };
      // The order is recorded with the token's consumption: a token pays for exactly one order.
      const redeemed = await ctx.tokens.redeem(presented, orderBinding(summary), { orderId, receipt });
      if (!redeemed.ok) return { status: 'failed', error: failureTexts[redeemed.reason] };
      return {
        status: 'completed',
        orderId,
        receipt,
        message: 'Order completed successfully. This is a simulated transaction.',
      };
    },
  };
}
