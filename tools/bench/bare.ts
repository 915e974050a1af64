// The baseline the gateway's singles are measured against: a bare Fastify app that validates the
// same single-push body with the same schema and validator, and answers `{push_id}`, storing nothing.
import Fastify from 'fastify';
import { v7 as uuidv7 } from 'uuid';
import { PushRequestSchema, typeboxValidatorCompiler } from '@operator/contract';

const app = Fastify({ logger: false });
app.setValidatorCompiler(typeboxValidatorCompiler);
app.post('/channels/push/single', { schema: { body: PushRequestSchema } }, async () => ({ push_id: uuidv7() }));
app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) }).then(() => process.send?.('ready'));
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
