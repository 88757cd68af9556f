// Signer's own settings: CHAIN_RPC_URLS from signer.chainRpcUrls (left out when blank, the default:
// no chain endpoint is contacted until an operator names one), given to signer alone; LOCAL_EVM_RPC_URL
// (dev and tests only) is never rendered.
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

  it('carries signer.chainRpcUrls as given', () => {
    const urls = 'ethereum=https://eth.example/v3/k,base=https://base.example';
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set-string',
      `signer.chainRpcUrls=${urls.replace(/,/g, '\\,')}`,
    ]);
    expect(envOf(objects, 'signer').get('CHAIN_RPC_URLS')).toEqual({ name: 'CHAIN_RPC_URLS', value: urls });
    for (const s of SERVICES.filter((x) => x !== 'signer')) {
      expect(envOf(objects, s).has('CHAIN_RPC_URLS')).toBe(false);
    }
  });
});
