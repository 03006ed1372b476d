/**
 * The OpenTelemetry SDK that `twokey serve` starts itself when the standard environment asks for
 * traces, so an operator needs no `--import` preload. It is imported only then: a start without
 * those variables loads none of it.
 */
import { spansRecorded } from './index.js';

export interface StartedTelemetry {
  /** Sends the spans still buffered; call it before the process exits. */
  shutdown(): Promise<void>;
}

/**
 * Whether the environment asks for traces: an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the
 * traces-only `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or an explicit `OTEL_TRACES_EXPORTER`
 * (`otlp`, `console`, `zipkin`); `OTEL_TRACES_EXPORTER=none` and `OTEL_SDK_DISABLED=true` say no.
 */
export function tracesRequested(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter === 'none') return false;
  return Boolean(exporter || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/**
 * Starts `@opentelemetry/sdk-node` configured by the standard `OTEL_*` variables (exporter, protocol,
 * endpoint, headers, sampler, propagators, resource), or does nothing and answers null. Only traces:
 * twokey's metrics are Prometheus (`/metrics`) and its logs go to stdout.
 */
export async function startTelemetry(env: NodeJS.ProcessEnv, serviceVersion: string): Promise<StartedTelemetry | null> {
  // An SDK the operator preloaded (`node --import …`) has registered its tracer provider already: it stays in charge.
  if (!tracesRequested(env) || spansRecorded()) return null;
  const { NodeSDK, resources } = await import('@opentelemetry/sdk-node');
  const named = Boolean(env.OTEL_SERVICE_NAME?.trim()) || /(?:^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const sdk = new NodeSDK({
    // The SDK's own defaults plus the version; OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME still win.
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.version': serviceVersion })),
    ...(named ? {} : { serviceName: 'twokey' }),
    // Left to the environment these default to OTLP too, and would send empty batches every minute.
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  return sdk;
}
