// Validation of rendered objects against their OpenAPI schemas: the Kubernetes built-in kinds
// (kubernetes-models) and the CRDs the chart may render (Prometheus Operator, Gateway API).
import * as gatewayV1 from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
import * as monitoringV1 from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import * as appsV1 from 'kubernetes-models/apps/v1';
import * as autoscalingV2 from 'kubernetes-models/autoscaling/v2';
import * as batchV1 from 'kubernetes-models/batch/v1';
import * as networkingV1 from 'kubernetes-models/networking.k8s.io/v1';
import * as policyV1 from 'kubernetes-models/policy/v1';
import * as coreV1 from 'kubernetes-models/v1';
import type { K8sObject } from './helm';

type Model = new (data: unknown) => { validate(): void };

// Model classes by apiVersion. A kind the chart renders whose apiVersion or kind is missing here
// fails validation, unless it is listed in UNVALIDATED_KINDS with the reason it cannot be checked.
const MODELS: Record<string, Record<string, unknown>> = {
  v1: coreV1,
  'apps/v1': appsV1,
  'autoscaling/v2': autoscalingV2,
  'batch/v1': batchV1,
  'networking.k8s.io/v1': networkingV1,
  'policy/v1': policyV1,
  'monitoring.coreos.com/v1': monitoringV1,
  'gateway.networking.k8s.io/v1': gatewayV1,
};

/**
 * "apiVersion/kind" entries that no models package validates: the cert-manager Certificate is
 * checked field by field in trust.spec.ts.
 */
const UNVALIDATED_KINDS: string[] = ['cert-manager.io/v1/Certificate'];

/** Throws with the object's id and the schema's complaint when `obj` is not valid. */
export function validateObject(obj: K8sObject): void {
  const id = `${obj.apiVersion}/${obj.kind}`;
  if (UNVALIDATED_KINDS.includes(id)) return;
  const model = MODELS[obj.apiVersion]?.[obj.kind] as Model | undefined;
  if (!model) throw new Error(`${id} ${obj.metadata.name}: no models class to validate it with`);
  try {
    new model(obj).validate();
  } catch (err) {
    throw new Error(`${id} ${obj.metadata.name} is invalid: ${(err as Error).message}`);
  }
}

/** The validation errors of `objects` (empty when all are valid). */
export function validationErrors(objects: K8sObject[]): string[] {
  const errors: string[] = [];
  for (const obj of objects) {
    try {
      validateObject(obj);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  return errors;
}
