-- An sqlite3 workload for the drop-in's tests: a table filled by a recursive CTE, an
-- index, updates and deletes, grouping, a self-join, window functions and string
-- building.  Its output must not depend on the allocator.
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, payload BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO t SELECT i, i % 97, printf('name-%06d-%s', i, substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26)),
       zeroblob(i % 700) FROM n;
CREATE INDEX t_name ON t(name);
UPDATE t SET name = upper(name) WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
SELECT grp, count(*), sum(length(payload)), min(name), max(name) FROM t GROUP BY grp ORDER BY grp LIMIT 10;
SELECT count(*) FROM t a JOIN t b ON a.grp = b.grp AND a.id + 97 = b.id;
SELECT id, name, rank() OVER (PARTITION BY grp ORDER BY name DESC) FROM t WHERE grp = 5 ORDER BY id LIMIT 5;
SELECT length(group_concat(name, ';')) FROM (SELECT name FROM t ORDER BY name);
SELECT hex(substr(group_concat(id), 1, 40)) FROM t WHERE name LIKE '%-00%';
VACUUM;
SELECT count(*), sum(id) FROM t;
