import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { MAX_USER_ID_LENGTH, MAX_WAGERING_MULTIPLE } from './limits';
import { UUID_PATTERN } from './ids';
import { PageLimit } from './paging';

// The CRM's bonus endpoints (contract 4.3-4.5) and the operator's back office. Credit bodies keep
// fields no schema lists; rules a schema cannot say are libs/bonus's.

// The values the CRM's bonus events accept; they are case-sensitive.
export const BONUS_TYPES = ['NoDeposit', 'WelcomeBonus', 'CashbackBonus', 'ReloadBonus', 'WagerFree', 'FreeSpins', 'RiskFreeBet', 'Undefined'] as const;
export const BONUS_PRODUCTS = ['Casino', 'Sportsbook', 'Lotto', 'Poker'] as const;
export const BONUS_STATUSES = ['Pending', 'Created', 'Ongoing', 'Completed', 'AutoCompleted', 'Forfeited', 'Expired', 'Lost', 'Reversed'] as const;
export type BonusStatus = (typeof BONUS_STATUSES)[number];
export const CREDIT_STATUSES = ['accepted', 'completed', 'failed'] as const;

const oneOf = <T extends string>(values: readonly T[], description?: string) => Type.Union(values.map((value) => Type.Literal(value)), { description });
const orNull = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const BrandId = (description: string) => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });
const Timestamp = (description: string) => Type.String({ format: 'date-time', description });
const Uuid = (description: string) => Type.String({ format: 'uuid', description });
const Money = (description: string) => Type.String({ description: `${description}: decimal text in major units, as many decimals as the currency has ("10.50", JPY "500")` });

const UserId = Type.String({ minLength: 1, maxLength: MAX_USER_ID_LENGTH, description: 'Player id' });
const BonusCode = (description: string) => Type.String({ minLength: 1, maxLength: 128, description });
const Currency = (description: string) => Type.String({ pattern: '^[A-Z]{3}$', errorMessage: 'must be an ISO 4217 code (like EUR)', description });
const Amount = (description: string) =>
  Type.Union([Type.Number(), Type.String()], {
    description: `${description}; a JSON number, read digit for digit as written (no exponent), or a decimal string`,
    errorMessage: 'must be a decimal number greater than zero (like 10.50 or "10.50")',
  });

export const CreditBonusRequestSchema = Type.Object(
  {
    user_id: UserId,
    bonus_code: BonusCode('Code of the catalog bonus'),
    amount: Type.Optional(orNull(Amount("Overrides the catalog bonus's amount"))),
    currency: Type.Optional(orNull(Currency("Overrides the catalog bonus's currency; give amount with another currency"))),
  },
  {
    $id: 'CreditBonusRequest',
    description: 'A catalog bonus for a player. Further campaign fields (like validity_amount) are accepted and kept with the credit as sent; null means absent.',
  },
);
export type CreditBonusRequest = Static<typeof CreditBonusRequestSchema>;

export const CreditFundsRequestSchema = Type.Object(
  {
    user_id: UserId,
    amount: Amount('Money for the wallet'),
    currency: Currency('ISO 4217 code'),
    bonus_code: Type.Optional(orNull(BonusCode('Reference of the campaign, kept with the credit'))),
    type: Type.Optional(orNull(Type.String({ minLength: 1, maxLength: 64, description: 'Kind of funds (cashback, wheel, ...); cashback when absent' }))),
  },
  {
    $id: 'CreditFundsRequest',
    description: "Money straight to the player's wallet. Further fields are accepted and kept with the credit as sent; null means absent.",
  },
);
export type CreditFundsRequest = Static<typeof CreditFundsRequestSchema>;

export const CreditAcceptedSchema = Type.Object(
  {
    credit_id: Uuid('The credit; a repeat (same `X-<Word>-Id`, or same activity, action, player and trigger hash) gets the first one'),
    status: Type.Literal('accepted'),
  },
  { $id: 'CreditAccepted', description: 'Recorded: the bonus app carries it out' },
);
export type CreditAccepted = Static<typeof CreditAcceptedSchema>;

export const BonusListSchema = Type.Object(
  {
    Data: Type.Array(
      Type.Object({
        text: Type.String({ description: "The bonus's label, shown in the CRM's dropdown" }),
        value: Type.String({ description: 'The bonus code' }),
      }),
    ),
    Success: Type.Boolean({ description: 'false when the list could not be read: Data is empty and Errors says why' }),
    Errors: Type.Array(Type.String()),
  },
  { $id: 'BonusList', description: 'The active catalog bonuses, key casing exactly as the CRM reads it; a failure is answered 200 too' },
);
export type BonusList = Static<typeof BonusListSchema>;

export const CatalogBonusRequestSchema = Type.Object(
  {
    label: Type.String({ minLength: 1, maxLength: 200, description: "Name shown in the CRM's dropdown" }),
    type: oneOf(BONUS_TYPES),
    product: oneOf(BONUS_PRODUCTS),
    amount: Type.String({ pattern: '^\\d{1,15}(\\.\\d{1,18})?$', errorMessage: 'must be a decimal amount as a string, like "10.00"', description: 'Amount credited, in major units' }),
    currency: Currency('ISO 4217 code'),
    validity_days: Type.Integer({ minimum: 1, maximum: 3650, description: 'Days a credited bonus lasts before it expires' }),
    // With MAX_AMOUNT_MINOR (parseAmount), amount x wagering fits the ledger's bigint.
    wagering_requirement: Type.Number({ minimum: 0, maximum: MAX_WAGERING_MULTIPLE, description: 'Times the amount to wager before it turns real' }),
    active: Type.Optional(Type.Boolean({ description: 'Listed and creditable; true when absent' })),
    brand_id: Type.Optional(orNull(BrandId('The brand the bonus is offered in; every brand when absent or null (a key bound to brands must name one of them)'))),
  },
  { $id: 'CatalogBonusRequest' },
);
export type CatalogBonusRequest = Static<typeof CatalogBonusRequestSchema>;

export const CatalogBonusSchema = Type.Object(
  {
    code: Type.String(),
    label: Type.String(),
    type: Type.String({ description: `One of ${BONUS_TYPES.join(', ')}` }),
    product: Type.String({ description: `One of ${BONUS_PRODUCTS.join(', ')}` }),
    amount: Money('Amount'),
    currency: Type.String(),
    validity_days: Type.Integer(),
    wagering_requirement: Type.Number(),
    active: Type.Boolean(),
    brand_id: orNull(Type.Integer({ description: 'The brand it is offered in; null: every brand' })),
  },
  { $id: 'CatalogBonus' },
);
export type CatalogBonus = Static<typeof CatalogBonusSchema>;

export const BonusCodeParamsSchema = Type.Object({
  code: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,128}$', errorMessage: 'must be letters, digits, _ . -', description: 'Bonus code' }),
});

export const CatalogBonusSavedSchema = Type.Object({ code: Type.String(), created: Type.Boolean({ description: 'true: new (201); false: updated (200)' }) });

export const WalletSchema = Type.Object(
  {
    user_id: Type.String(),
    balances: Type.Array(
      Type.Object({
        brand_id: Type.Integer({ description: 'The brand of the wallet: the same player id in two brands has two' }),
        currency: Type.String(),
        key: oneOf(['real_money', 'bonus_money'] as const),
        amount: Money('Balance'),
      }),
      { description: 'Both keys for every brand and currency the player holds, in the brands the key opens' },
    ),
  },
  { $id: 'Wallet' },
);

export const LedgerSchema = Type.Object(
  {
    entries: Type.Array(
      Type.Object({
        id: Type.String(),
        brand_id: Type.Integer({ description: 'The brand of the wallet the entry is in' }),
        transaction_id: Type.String({ description: 'The credit (or bonus status change) that moved the money' }),
        currency: Type.String(),
        key: oneOf(['real_money', 'bonus_money'] as const),
        amount: Money('Signed amount'),
        reason: Type.String(),
        created_at: Timestamp('When it was posted'),
      }),
      { description: 'Newest first' },
    ),
  },
  { $id: 'Ledger' },
);

export const PlayerBonusSchema = Type.Object(
  {
    user_bonus_id: Uuid("The operator's id of this player's bonus"),
    credit_id: Uuid('The credit that gave it'),
    brand_id: Type.Integer({ description: "Its credit's brand" }),
    bonus_code: Type.String(),
    type: Type.String(),
    product: Type.String(),
    amount: Money('Amount'),
    currency: Type.String(),
    required_wagering_amount: Money('Wagering still required'),
    status: Type.String({ description: `One of ${BONUS_STATUSES.join(', ')}` }),
    expires_at: Timestamp('When it expires unless it ends before'),
    created_at: Timestamp('Created'),
    updated_at: Timestamp('Last changed'),
  },
  { $id: 'PlayerBonus' },
);

export const PlayerBonusStatusParamsSchema = Type.Object({
  user_id: Type.String({ description: 'Player id' }),
  id: Type.String({ pattern: UUID_PATTERN, errorMessage: 'must be a user_bonus_id', description: 'user_bonus_id' }),
});

export const BonusStatusRequestSchema = Type.Object({ status: oneOf(BONUS_STATUSES, 'The new status; a final one is never left') });

export const BonusStatusChangedSchema = Type.Object({
  user_bonus_id: Uuid("The player's bonus"),
  status: Type.String(),
  changed: Type.Boolean({ description: 'false when it already had this status (nothing reported again)' }),
});

export const CreditSchema = Type.Object(
  {
    credit_id: Uuid('The credit'),
    brand_id: Type.Integer({ description: "The brand it is for: the credential's, or BONUS_DEFAULT_BRAND" }),
    kind: oneOf(['bonus', 'funds'] as const),
    user_id: Type.String(),
    bonus_code: orNull(Type.String()),
    amount: Money('Amount'),
    currency: Type.String(),
    type: Type.String({ description: "The bonus's type, or the kind of funds" }),
    status: oneOf(CREDIT_STATUSES),
    error: orNull(Type.String({ description: 'Why it failed' })),
    reference: orNull(Type.String({ description: "The operator platform's reference" })),
    attempts: Type.Integer(),
    request: Type.Unknown({ description: 'The CRM request body, as sent' }),
    headers: Type.Record(Type.String(), Type.String(), { description: 'The CRM headers of the request (id, activity_id, action_id, ...)' }),
    created_at: Timestamp('Received'),
    updated_at: Timestamp('Last changed'),
  },
  { $id: 'Credit' },
);
export type CreditView = Static<typeof CreditSchema>;

export const CreditQuerySchema = Type.Object({
  user_id: Type.Optional(Type.String({ description: 'Only this player' })),
  status: Type.Optional(oneOf(CREDIT_STATUSES, 'Only credits in this status')),
  limit: PageLimit,
});
