import { parseResourceAttributes, resourceAttributesOf } from './otel-resource';

describe('parseResourceAttributes', () => {
  it('reads comma-separated key=value pairs, trimmed and percent-decoded', () => {
    expect(
      parseResourceAttributes(
        ' deployment.environment=prod , k8s.pod.name=vault-crypto-7f9c,team=platform%2Csecurity,note=a%3Db%20c',
      ),
    ).toEqual({
      attributes: {
        'deployment.environment': 'prod',
        'k8s.pod.name': 'vault-crypto-7f9c',
        team: 'platform,security',
        note: 'a=b c',
      },
    });
  });

  it('keeps an empty value, the last of a repeated key, and tolerates a trailing comma', () => {
    expect(parseResourceAttributes('a=,b=1,b=2,')).toEqual({ attributes: { a: '', b: '2' } });
  });

  it('is empty when unset or blank', () => {
    expect(parseResourceAttributes(undefined)).toEqual({ attributes: {} });
    expect(parseResourceAttributes('  ')).toEqual({ attributes: {} });
  });

  it('discards a malformed list whole, naming the pair but not its value', () => {
    const noEq = parseResourceAttributes('a=1,secretvalue');
    expect(noEq).toEqual({ error: 'pair 2 is not key=value' });
    expect(parseResourceAttributes('=x')).toEqual({ error: 'pair 1 is not key=value' });
    expect(parseResourceAttributes('a=%zz')).toEqual({ error: 'pair 1 has an invalid percent-encoding' });
    expect(parseResourceAttributes('%20=x')).toEqual({ error: 'pair 1 has an empty key' });
    expect(JSON.stringify(noEq)).not.toContain('secretvalue');
  });
});

describe('resourceAttributesOf', () => {
  const attributes = { 'service.name': 'from-attrs', 'k8s.namespace.name': 'custos' };

  it('merges the attributes under the built-in service name', () => {
    expect(
      resourceAttributesOf({ serviceName: 'audit', attributes: { 'k8s.namespace.name': 'custos' } }),
    ).toEqual({
      'service.name': 'audit',
      'k8s.namespace.name': 'custos',
    });
  });

  it('gives OTEL_SERVICE_NAME precedence over service.name in the attributes, and that over the default', () => {
    expect(resourceAttributesOf({ serviceName: 'audit', otelServiceName: 'audit-eu', attributes })).toEqual({
      'service.name': 'audit-eu',
      'k8s.namespace.name': 'custos',
    });
    expect(resourceAttributesOf({ serviceName: 'audit', attributes })['service.name']).toBe('from-attrs');
    expect(resourceAttributesOf({ serviceName: 'audit', otelServiceName: ' ' })['service.name']).toBe(
      'audit',
    );
  });
});
