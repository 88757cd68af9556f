// httpRoute.*: a Gateway API HTTPRoute to the gateway's HTTP port, valid against the Gateway API
// schema, and the gateway's NetworkPolicy admitting the Gateway implementation's proxies.
import { GATEWAY_HTTP_PORT } from './facts';
import {
  type Json,
  type K8sObject,
  named,
  objectName,
  ofKind,
  renderChart,
  renderFailure,
  runHelm,
  chartDir,
  scenarios,
  serviceEnv,
  sets,
} from './helm';
import { validationErrors } from './validate';

const production = scenarios[1]!.args;
const routeSets = sets(
  'httpRoute.enabled=true',
  'httpRoute.parentRefs[0].name=public',
  'httpRoute.parentRefs[0].namespace=gateway-system',
  'httpRoute.parentRefs[0].sectionName=https',
  'httpRoute.hostnames={api.example.org}',
  'httpRoute.labels.team=platform',
);

function httpRule(objects: K8sObject[]): Json {
  const policy = named(objects, 'NetworkPolicy', objectName('gateway'));
  return policy.spec.ingress.find((r: Json) => r.ports.some((p: Json) => p.port === GATEWAY_HTTP_PORT));
}

describe('HTTPRoute', () => {
  it.each(scenarios)('is off by default ($label)', ({ args }) => {
    const objects = renderChart(args);
    expect(ofKind(objects, 'HTTPRoute')).toEqual([]);
    expect(JSON.stringify(httpRule(objects))).not.toContain('envoy-gateway-system');
  });

  it('routes its host names to the gateway Service’s HTTP port and validates against the Gateway API schema', () => {
    const objects = renderChart([...production, ...routeSets, ...sets('ingress.enabled=false')]);
    const [route, ...more] = ofKind(objects, 'HTTPRoute');
    expect(more).toEqual([]);
    expect(validationErrors([route!])).toEqual([]);
    expect(route!.metadata.labels.team).toBe('platform');
    expect(route!.spec).toEqual({
      parentRefs: [{ name: 'public', namespace: 'gateway-system', sectionName: 'https' }],
      hostnames: ['api.example.org'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/' } }],
          backendRefs: [{ name: objectName('gateway'), port: GATEWAY_HTTP_PORT }],
        },
      ],
    });
    const svc = named(objects, 'Service', objectName('gateway'));
    expect(svc.spec.ports).toContainEqual(expect.objectContaining({ name: 'http', port: GATEWAY_HTTP_PORT }));
    expect(ofKind(objects, 'Ingress')).toEqual([]);
    // The issuer follows the route's host when the Ingress is off and tokens.issuer is empty.
    expect(serviceEnv(objects, 'identity').get('TOKEN_ISSUER')?.value).toBe('https://api.example.org');
  });

  it('the gateway NetworkPolicy admits the Gateway implementation’s proxies to the HTTP port, beside the ingress controller', () => {
    const objects = renderChart([
      ...production,
      ...routeSets,
      ...sets(
        'networkPolicy.gatewayController.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=istio-ingress',
        'networkPolicy.gatewayController.podSelector.matchLabels.istio=ingressgateway',
      ),
    ]);
    expect(validationErrors(objects)).toEqual([]);
    expect(httpRule(objects).from).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ingress-nginx' } },
      },
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'istio-ingress' } },
        podSelector: { matchLabels: { istio: 'ingressgateway' } },
      },
    ]);
    // Both routes may live side by side while traffic moves (docs/deployment.md, "HTTPRoute").
    expect(ofKind(objects, 'Ingress')).toHaveLength(1);
    expect(ofKind(objects, 'HTTPRoute')).toHaveLength(1);
  });

  it('admits only what routes traffic: no ingress controller without the Ingress, no HTTP rule without either', () => {
    let objects = renderChart([...production, ...routeSets, ...sets('ingress.enabled=false')]);
    expect(httpRule(objects).from).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'envoy-gateway-system' } },
        podSelector: {},
      },
    ]);
    objects = renderChart([...production, ...sets('ingress.enabled=false')]);
    // Not an HTTP rule without `from`, which would admit every source: no HTTP rule at all.
    expect(httpRule(objects)).toBeUndefined();
    expect(validationErrors(objects)).toEqual([]);
    objects = renderChart([
      ...production,
      ...sets('ingress.enabled=false', 'networkPolicy.gatewayHttpExtraFrom[0].ipBlock.cidr=10.0.5.0/24'),
    ]);
    expect(httpRule(objects).from).toEqual([{ ipBlock: { cidr: '10.0.5.0/24' } }]);
  });

  it('refuses a route without parentRefs, and a gatewayController that selects every pod', () => {
    let r = renderFailure([...production, ...sets('httpRoute.enabled=true')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/httpRoute.parentRefs/);
    r = renderFailure([
      ...production,
      ...routeSets,
      // null deletes the default's key: both selectors are then empty.
      ...sets('networkPolicy.gatewayController.namespaceSelector.matchLabels=null'),
    ]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/networkPolicy.gatewayController/);
  });

  it('never derives the token issuer from a wildcard host: skips it, or refuses without tokens.issuer', () => {
    const route = (hosts: string, ...more: string[]) => [
      ...production,
      ...routeSets,
      ...sets('ingress.enabled=false', `httpRoute.hostnames={${hosts}}`, ...more),
    ];
    let env = serviceEnv(renderChart(route('*.example.org,api.example.org')), 'identity');
    expect(env.get('TOKEN_ISSUER')?.value).toBe('https://api.example.org');
    let r = renderFailure(route('*.example.org'));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/every httpRoute host name is a wildcard.*tokens.issuer/);
    env = serviceEnv(
      renderChart(route('*.example.org', 'tokens.issuer=https://api.example.org')),
      'identity',
    );
    expect(env.get('TOKEN_ISSUER')?.value).toBe('https://api.example.org');
    expect(env.get('PUBLIC_BASE_URL')?.value).toBe('https://api.example.org');
    r = renderFailure([...production, ...sets('ingress.host=*.example.org')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/Ingress host \*\.example\.org is a wildcard/);
  });

  it('NOTES name the route’s URL', () => {
    const { status, stdout } = runHelm([
      'install',
      'custos',
      chartDir,
      '--dry-run=client',
      ...production,
      ...routeSets,
    ]);
    expect(status).toBe(0);
    expect(stdout).toContain('https://api.example.org/v1/health');
  });
});
