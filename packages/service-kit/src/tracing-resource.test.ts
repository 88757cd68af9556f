import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { parseResourceAttributes } from './otel-resource';
import { initTracing, withSpan } from './tracing';

describe('initTracing resource', () => {
  it('puts OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME on every exported span', async () => {
    const exporter = new InMemorySpanExporter();
    const parsed = parseResourceAttributes('deployment.environment=prod,k8s.pod.name=audit-0%2Ca');
    if (!('attributes' in parsed)) throw new Error(parsed.error);
    const tracing = initTracing({
      serviceName: 'audit',
      serviceVersion: '1.2.3',
      exporter,
      scheduledDelayMillis: 10,
      otelServiceName: 'audit-eu',
      resourceAttributes: parsed.attributes,
    });
    await withSpan('work', {}, async () => undefined);
    await tracing.forceFlush();
    const [span] = exporter.getFinishedSpans();
    await tracing.shutdown();
    expect(span?.resource.attributes).toMatchObject({
      'service.name': 'audit-eu',
      'service.version': '1.2.3',
      'deployment.environment': 'prod',
      'k8s.pod.name': 'audit-0,a',
    });
  });
});
