// An allocation-heavy node program for the drop-in's tests: objects, strings, Maps, JSON,
// regular expressions and Buffers (whose memory is node's, outside V8's heap: malloc's),
// half dropped along the way.  Prints digests that must not depend on the allocator.
// Usage: node alloc.js [ROUNDS]
'use strict';
const crypto = require('crypto');
const zlib = require('zlib');
const rounds = Number(process.argv[2] || 3);
const h = crypto.createHash('sha256');
for (let r = 0; r < rounds; r++) {
  const m = new Map();
  for (let i = 0; i < 50000; i++) m.set('k' + i, { i, s: 'x'.repeat(i % 40), t: [i, i * 2] });
  for (let i = 0; i < 50000; i += 2) m.delete('k' + i);
  const blob = JSON.stringify([...m.entries()].slice(0, 20000));
  const back = JSON.parse(blob);
  const bufs = [];
  for (let i = 0; i < 2000; i++) bufs.push(Buffer.alloc(64 + (i % 500) * 37, i & 255));
  const joined = Buffer.concat(bufs);
  const packed = zlib.deflateSync(joined);
  const total = [...blob.matchAll(/"k(\d+)"/g)].reduce((a, mm) => a + Number(mm[1]), 0);
  h.update(blob).update(String(back.length)).update(String(total)).update(packed);
}
console.log('digest', h.digest('hex'));
