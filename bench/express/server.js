// The peer: Express + express-session with its default in-memory store, keeping
// the same per-user counter as troupe's notes sample.
//   node server.js PORT   → prints "express listening on http://127.0.0.1:PORT"
'use strict';
const express = require('express');
const session = require('express-session');

const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.use(session({
  secret: 'troupe-bench',
  resave: false,
  saveUninitialized: true,  // like troupe: a first visit gets a user and a cookie
  cookie: { httpOnly: true, sameSite: 'lax' },
}));
app.get('/api/counter', (req, res) => res.json({ count: req.session.count || 0 }));
app.post('/api/counter/incr', (req, res) => {
  req.session.count = (req.session.count || 0) + 1;
  res.json({ count: req.session.count });
});
app.get('/api/whoami', (req, res) => res.json({ user: 'guest_' + req.sessionID }));

const server = app.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
  console.log(`express listening on http://127.0.0.1:${server.address().port}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
