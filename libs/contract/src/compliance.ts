import { Type, type Static } from '@sinclair/typebox';
import { MAX_USER_ID_LENGTH } from './limits';

// POST /v1/compliance/events: the CRM's own USER_BLOCK_V2 and USER_CONSENTS_V2 bodies, which say a
// player's blocks or consents changed. Fields the CRM adds are kept out of the way, not refused.

/** The most events one request may carry. */
export const COMPLIANCE_EVENTS_MAX = 1000;

export const ComplianceEventSchema = Type.Object(
  {
    user_id: Type.String({ minLength: 1, maxLength: MAX_USER_ID_LENGTH, description: 'The player whose blocks or consents changed' }),
    timestamp: Type.Optional(Type.String({ maxLength: 64, description: 'When they changed (RFC 3339)' })),
    origin: Type.Optional(Type.String({ maxLength: 255, description: 'Origin label' })),
  },
  { $id: 'ComplianceEvent', description: 'A USER_BLOCK_V2 or USER_CONSENTS_V2 body' },
);
export type ComplianceEvent = Static<typeof ComplianceEventSchema>;

export const ComplianceEventListSchema = Type.Array(ComplianceEventSchema, { minItems: 1, maxItems: COMPLIANCE_EVENTS_MAX });

export const ComplianceEventsSchema = Type.Union([ComplianceEventSchema, ComplianceEventListSchema], {
  description: `One event, or an array of 1 to ${COMPLIANCE_EVENTS_MAX}`,
});
export type ComplianceEvents = ComplianceEvent | ComplianceEvent[];

export const ComplianceEventsAcceptedSchema = Type.Object(
  { players: Type.Integer({ description: 'Distinct players announced to the push workers, whose cached answers they drop' }) },
  { $id: 'ComplianceEventsAccepted' },
);
