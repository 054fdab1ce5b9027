// Builds the dashboard bundle with esbuild.
//   node build.mjs --outdir <dir>                  production bundle: index.html and
//                                                  assets/app-<hash>.{js,css}
//   node build.mjs --serve [--api URL] [--port N]  development server: rebuilds on change and
//                                                  forwards /api, /healthz and /metrics to URL
//                                                  (a running `chamber demo`)
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    outdir: { type: 'string' },
    serve: { type: 'boolean', default: false },
    api: { type: 'string', default: 'http://127.0.0.1:8080' },
    port: { type: 'string', default: '5173' },
  },
});

function options(outdir, production) {
  return {
    entryPoints: { 'assets/app': path.join(here, 'src/main.tsx') },
    outdir,
    bundle: true,
    format: 'esm',
    target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: production,
    sourcemap: production ? false : 'inline',
    legalComments: production ? 'eof' : 'inline',
    define: { 'process.env.NODE_ENV': production ? '"production"' : '"development"' },
    logLevel: 'warning',
  };
}

if (args.serve) {
  const outdir = path.join(here, 'node_modules/.cache/chamber-dev');
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  copyFileSync(path.join(here, 'src/index.html'), path.join(outdir, 'index.html'));
  const ctx = await esbuild.context(options(outdir, false));
  await ctx.watch();
  const { port: esbuildPort } = await ctx.serve({ servedir: outdir, host: '127.0.0.1' });
  const api = new URL(args.api);
  const forward = (req, res, host, port, rewrite) => {
    const upstream = http.request(
      { host, port, path: rewrite ?? req.url, method: req.method, headers: req.headers },
      (up) => {
        if (up.statusCode === 404 && rewrite === undefined && !isApi(req.url)) {
          up.resume();
          forward(req, res, host, port, '/index.html'); // client-side routes
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', (e) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`cannot reach ${host}:${port}: ${e.message}\n`);
    });
    req.pipe(upstream);
  };
  const isApi = (url) => /^\/(api\/|healthz|metrics)/.test(url ?? '');
  http
    .createServer((req, res) => {
      if (isApi(req.url)) forward(req, res, api.hostname, Number(api.port || 80));
      else forward(req, res, '127.0.0.1', esbuildPort);
    })
    .listen(Number(args.port), '127.0.0.1', () => {
      console.log(`dashboard: http://127.0.0.1:${args.port}/ (API from ${api.origin})`);
    });
} else {
  if (!args.outdir) {
    console.error('usage: node build.mjs --outdir <dir> | --serve [--api URL] [--port N]');
    process.exit(2);
  }
  const outdir = path.resolve(args.outdir);
  // Start clean: every file in outdir is embedded into the binary.
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  // Content hashes in the names let the server cache assets for long: a new build has new names,
  // and index.html, which names them, is never cached.
  const result = await esbuild.build({ ...options(outdir, true), entryNames: '[dir]/[name]-[hash]', metafile: true });
  const outputs = Object.keys(result.metafile.outputs).map((file) => '/' + path.relative(outdir, path.resolve(file)));
  const script = outputs.find((file) => file.endsWith('.js'));
  const style = outputs.find((file) => file.endsWith('.css'));
  if (!script || !style) throw new Error(`esbuild wrote no script or stylesheet: ${outputs.join(', ')}`);
  const html = readFileSync(path.join(here, 'src/index.html'), 'utf8')
    .replace('/assets/app.js', script)
    .replace('/assets/app.css', style);
  writeFileSync(path.join(outdir, 'index.html'), html);
}
