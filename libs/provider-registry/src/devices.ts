import { checkDeviceCredential as checkWith, deviceSchema, registerDeviceSchema, type RegisterDevice } from '@operator/contract';
import { PROVIDERS } from './registry';

/** The body of POST /v1/devices: a device of any registered provider. */
export const RegisterDeviceSchema = registerDeviceSchema(PROVIDERS);
/** A device as the API answers it. */
export const DeviceSchema = deviceSchema(PROVIDERS);

/** Why a device's registration is refused with 400, or null: the shared rules, then its provider's. */
export function checkDeviceCredential(device: RegisterDevice): string | null {
  const provider = PROVIDERS.find((candidate) => candidate.name === device.provider);
  if (!provider) return `provider must be one of ${PROVIDERS.map((candidate) => candidate.name).join(', ')}`;
  return checkWith(device, provider.checkDevice);
}
