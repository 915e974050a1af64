-- Written by hand: the schema language cannot declare a function (see "Changing the database
-- schema" in README.md).

-- A UUIDv7 made in the database, for rows a statement creates itself (the deliveries the gateway
-- inserts together with their messages): the first 48 bits are the Unix time in milliseconds, so
-- new rows land at the right edge of the primary key's index, as the application's own ids do.
-- A random v4 id with its first six bytes replaced by the time, and its version nibble turned
-- from 4 (0100) into 7 (0111) by setting bits 52 and 53.
-- (SQL, not PL/pgSQL: Prisma's driver adapter splits a migration at every semicolon.)
CREATE FUNCTION "uuid_v7"() RETURNS UUID LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                                        PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::BIGINT) FROM 3)
                                        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::UUID
$$
