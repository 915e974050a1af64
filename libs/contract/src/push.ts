import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { MAX_JSON_DEPTH, MAX_USER_ID_LENGTH } from './limits';

// Contract sections 2.1 to 2.6. Objects accept and keep fields the contract does not list: the CRM
// adds fields over time, and a rejected push is lost. What no schema can say, checkStorable checks.

const MAX_SAFE_ID = Number.MAX_SAFE_INTEGER;
const Id = (description: string) => Type.Integer({ minimum: 0, maximum: MAX_SAFE_ID, description });
const Text = (description: string, maxLength = 1024) => Type.String({ maxLength, description });
const TextList = (description: string) => Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 64, description });
const Opt = <T extends TSchema>(schema: T) => Type.Optional(schema);

export const ActivitySchema = Type.Object(
  {
    id: Id('Unique id of the push notification in the CRM; echoed as "id" in batch answers'),
    brand_id: Id('Brand id in the CRM'),
    user_id: Type.String({ minLength: 1, maxLength: MAX_USER_ID_LENGTH, description: 'Player id' }),
    activity_id: Id('Id of the activity set up in the CRM'),
    action_group_id: Id('Action group the push comes from'),
    trigger_hash: Type.String({ minLength: 1, maxLength: 1024, description: 'Trigger hash' }),
    action_id: Id('Id of the individual action'),
    origin: Opt(Type.String({ maxLength: 255, description: 'Origin label' })),
  },
  { $id: 'Activity' },
);
export type Activity = Static<typeof ActivitySchema>;

export const AndroidSchema = Type.Object(
  {
    priority: Opt(Text('Delivery priority (normal or high)', 32)),
    ttl: Opt(Text('Time to live, as seconds ("3600" or "3600s")', 32)),
    collapse_key: Opt(Text('Key to collapse pending messages')),
    restricted_package_name: Opt(Text('Target Android package name')),
    icon: Opt(Text('Icon resource name')),
    color_rgb: Opt(Text('Accent colour, #rrggbb', 32)),
    sound: Opt(Text('Notification sound')),
    tag: Opt(Text('Tag that replaces an existing notification')),
    click_action: Opt(Text('Action on tap')),
    body_loc_key: Opt(Text('Localisation key of the body')),
    body_loc_arcs: Opt(TextList('Substitution values for body_loc_key (name exactly as in the contract)')),
    title_loc_keys: Opt(Text('Localisation key of the title (name exactly as in the contract)')),
    title_loc_args: Opt(TextList('Substitution values for title_loc_keys')),
    channel_id: Opt(Text('Android notification channel id')),
  },
  { $id: 'Android' },
);
export type Android = Static<typeof AndroidSchema>;

export const IosSchema = Type.Object(
  {
    badge: Opt(Text('App icon badge count', 32)),
    category: Opt(Text('Notification category id')),
    thread_id: Opt(Text('Thread id for grouping')),
    sub_title: Opt(Text('Subtitle')),
    loc_key: Opt(Text('Localisation key of the body')),
    loc_args: Opt(TextList('Substitution values for loc_key')),
    title_loc_key: Opt(Text('Localisation key of the title')),
    title_loc_args: Opt(TextList('Substitution values for title_loc_key')),
    sub_title_loc_key: Opt(Text('Localisation key of the subtitle')),
    sub_title_loc_args: Opt(TextList('Substitution values for sub_title_loc_key')),
    action_loc_key: Opt(Text('Localisation key of the action button label')),
    launch_image: Opt(Text('Launch image file name')),
  },
  { $id: 'Ios' },
);
export type Ios = Static<typeof IosSchema>;

export const WebSchema = Type.Object(
  {
    icon: Opt(Text('Icon URL', 2048)),
    badge: Opt(Text('Badge icon URL', 2048)),
    dir: Opt(Type.Union([Type.Literal('ltr'), Type.Literal('rtl'), Type.Literal('auto')], { description: 'Text direction' })),
    lang: Opt(Text('Language tag', 64)),
    renotify: Opt(Text('Notify again when replacing a notification ("true"/"false")', 16)),
    require_interaction: Opt(Text('Stay until the user interacts ("true"/"false")', 16)),
    silent: Opt(Text('Silent notification ("true"/"false")', 16)),
    tag: Opt(Text('Tag that replaces an existing notification')),
    timestamp: Opt(Type.Integer({ minimum: 0, maximum: MAX_SAFE_ID, description: 'Unix timestamp of the notification' })),
    vibrate: Opt(TextList('Vibration pattern, durations in milliseconds')),
    link: Opt(Text('URL opened on click', 2048)),
  },
  { $id: 'Web' },
);
export type Web = Static<typeof WebSchema>;

export const MetaSchema = Type.Record(Type.String(), Type.Unknown(), {
  description: `Custom key-value pairs of the CRM activity, returned with every delivery status; nested at most ${MAX_JSON_DEPTH} levels`,
});

export const PushRequestSchema = Type.Object(
  {
    activity: ActivitySchema,
    title: Type.String({ maxLength: 1024, description: 'Notification title' }),
    body: Type.String({ maxLength: 4096, description: 'Notification body text' }),
    image_url: Opt(Text('URL of an image to show', 2048)),
    android: Opt(AndroidSchema),
    ios: Opt(IosSchema),
    web: Opt(WebSchema),
    meta: Opt(MetaSchema),
  },
  { $id: 'PushRequest' },
);
export type PushRequest = Static<typeof PushRequestSchema>;

export const PushAcceptedSchema = Type.Object({ push_id: Type.String({ format: 'uuid' }) }, { $id: 'PushAccepted' });
export type PushAccepted = Static<typeof PushAcceptedSchema>;

export const BatchSuccessSchema = Type.Object({ id: Type.Integer(), push_id: Type.String() });
export const BatchFailureSchema = Type.Object({ id: Type.Union([Type.Integer(), Type.Null()]), error: Type.String() });

export const BatchResultSchema = Type.Object(
  {
    successful: Type.Array(BatchSuccessSchema),
    failed: Type.Array(BatchFailureSchema),
    fatal: Type.Array(BatchFailureSchema),
  },
  { $id: 'BatchResult' },
);
export type BatchResult = Static<typeof BatchResultSchema>;
export type BatchSuccess = Static<typeof BatchSuccessSchema>;
export type BatchFailure = Static<typeof BatchFailureSchema>;

