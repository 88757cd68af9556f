// Signer's own settings: CHAIN_RPC_URLS from signer.chainRpcUrls or chainRpcUrlsExistingSecret (left
// out when blank, the default: no chain endpoint is contacted until an operator names one), always
// from a Secret (provider URLs embed their keys), given to signer alone; LOCAL_EVM_RPC_URL (dev and
// tests only) is never rendered.
import { SERVICES } from './facts';
import { type Json, type K8sObject, REQUIRED_SETS, named, objectName, renderChart } from './helm';

function envOf(objects: K8sObject[], service: string): Map<string, Json> {
  const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
  return new Map((container.env ?? []).map((e: Json) => [e.name, e]));
}

describe('signer rendered: CHAIN_RPC_URLS', () => {
  it('is left out by default (blank), and reaches no other service', () => {
    const objects = renderChart(REQUIRED_SETS);
    for (const s of SERVICES) expect(envOf(objects, s).has('CHAIN_RPC_URLS')).toBe(false);
    for (const s of SERVICES) expect(envOf(objects, s).has('LOCAL_EVM_RPC_URL')).toBe(false);
  });

  it('carries signer.chainRpcUrls as given, from the chart-managed Secret, never as a plain value', () => {
    const urls = 'ethereum=https://eth.example/v3/k,base=https://base.example';
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set-string',
      `signer.chainRpcUrls=${urls.replace(/,/g, '\\,')}`,
    ]);
    const env = envOf(objects, 'signer').get('CHAIN_RPC_URLS');
    expect(env).toEqual({
      name: 'CHAIN_RPC_URLS',
      valueFrom: { secretKeyRef: { name: expect.any(String), key: 'chain-rpc-urls' } },
    });
    const secret = named(objects, 'Secret', env.valueFrom.secretKeyRef.name);
    expect(Buffer.from(secret.data['chain-rpc-urls'], 'base64').toString()).toBe(urls);
    // The key appears in no ConfigMap, Deployment or other plain value.
    const plain = objects.filter((o) => o.kind !== 'Secret').map((o) => JSON.stringify(o));
    expect(plain.some((t) => t.includes('eth.example/v3/k'))).toBe(false);
    for (const s of SERVICES.filter((x) => x !== 'signer')) {
      expect(envOf(objects, s).has('CHAIN_RPC_URLS')).toBe(false);
    }
  });

  it('an existing Secret wins over the inline value, which is then not rendered', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set-string',
      'signer.chainRpcUrls=ethereum=https://eth.example/v3/inline',
      '--set',
      'signer.chainRpcUrlsExistingSecret=my-chains',
      '--set',
      'signer.chainRpcUrlsExistingSecretKey=urls',
    ]);
    expect(envOf(objects, 'signer').get('CHAIN_RPC_URLS')).toEqual({
      name: 'CHAIN_RPC_URLS',
      valueFrom: { secretKeyRef: { name: 'my-chains', key: 'urls' } },
    });
    expect(objects.some((o) => JSON.stringify(o).includes('eth.example/v3/inline'))).toBe(false);
  });
});
