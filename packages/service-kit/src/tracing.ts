import {
  context,
  propagation,
  trace,
  type Context,
  type Span,
  type SpanOptions,
  SpanStatusCode,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator, W3CBaggagePropagator, CompositePropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { resourceAttributesOf } from './otel-resource.js';

let provider: NodeTracerProvider | undefined;

/** Options for initTracing; the exporter is OTLP/HTTP when an endpoint is configured. */
export interface TracingOptions {
  serviceName: string;
  serviceVersion?: string;
  /** Base URL of an OTLP/HTTP collector, e.g. `http://otel-collector:4318`. */
  otlpEndpoint?: string | undefined;
  /** Extra exporter (tests pass an in-memory one). */
  exporter?: SpanExporter;
  /** How often batched spans are exported, in milliseconds. */
  scheduledDelayMillis?: number;
  /** OTEL_SERVICE_NAME: names the process in traces instead of `serviceName`. */
  otelServiceName?: string | undefined;
  /** Attributes of OTEL_RESOURCE_ATTRIBUTES (parseResourceAttributes), merged under `service.name`. */
  resourceAttributes?: Record<string, string>;
}

/**
 * Installs the process-wide tracer provider with W3C trace-context propagation. Call it first in
 * main.ts. Without an exporter, spans this process starts are not recorded (a sampler that
 * keeps a caller's decision and samples no new trace): they still carry trace ids, so ids
 * propagate, but no attributes, events or timings are collected only to be dropped (measured:
 * ~5 % of a busy service's CPU). A caller that sends a sampled `traceparent` is still honoured.
 */
export function initTracing(opts: TracingOptions): {
  shutdown: () => Promise<void>;
  forceFlush: () => Promise<void>;
} {
  const processors: SpanProcessor[] = [];
  const delay = opts.scheduledDelayMillis ?? 2000;
  if (opts.otlpEndpoint) {
    const url = `${opts.otlpEndpoint.replace(/\/$/, '')}/v1/traces`;
    processors.push(new BatchSpanProcessor(new OTLPTraceExporter({ url }), { scheduledDelayMillis: delay }));
  }
  if (opts.exporter) processors.push(new BatchSpanProcessor(opts.exporter, { scheduledDelayMillis: delay }));
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_VERSION]: opts.serviceVersion ?? '0.1.0',
      ...resourceAttributesOf({
        serviceName: opts.serviceName,
        otelServiceName: opts.otelServiceName,
        ...(opts.resourceAttributes ? { attributes: opts.resourceAttributes } : {}),
      }),
    }),
    spanProcessors: processors,
    ...(processors.length === 0 ? { sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }) } : {}),
  });
  provider.register({
    propagator: new CompositePropagator({
      propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
    }),
  });
  const p = provider;
  return { shutdown: () => p.shutdown(), forceFlush: () => p.forceFlush() };
}

/** The tracer for Custos instrumentation. */
export function tracer(): Tracer {
  return trace.getTracer('custos');
}

/** Writes the active (or given) trace context into a string carrier: HTTP headers, gRPC metadata, NATS headers. */
export function injectTraceContext(carrier: Record<string, string>, ctx: Context = context.active()): void {
  propagation.inject(ctx, carrier);
}

/** Reads a trace context from a carrier written by injectTraceContext. */
export function extractTraceContext(carrier: Record<string, string | string[] | undefined>): Context {
  return propagation.extract(context.active(), carrier, {
    get: (c, key) => c[key],
    keys: (c) => Object.keys(c),
  });
}

/** Runs `fn` inside a new span (child of `parent` or the active context), recording failures. */
export async function withSpan<T>(
  name: string,
  options: SpanOptions & { parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ?? context.active();
  const span = tracer().startSpan(name, options, parent);
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn(span);
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.name : 'error' });
      throw err;
    } finally {
      span.end();
    }
  });
}
