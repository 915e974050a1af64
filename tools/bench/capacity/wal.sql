-- 1,000 rows of 1 kB in one statement, no index: how fast the server writes WAL alone.
INSERT INTO walt SELECT g, repeat('w', 1000) FROM generate_series(1, 1000) g;
