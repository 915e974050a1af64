-- One small row a transaction: commits (WAL flushes) per second.
\set brand random(1, 1000000000)
INSERT INTO rowt (id, brand, k, user_id, payload) VALUES (gen_random_uuid(), :brand, 0, 'p', '{"a":1}') ON CONFLICT DO NOTHING;
