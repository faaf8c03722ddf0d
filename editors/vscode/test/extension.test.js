#!/usr/bin/env node
// Tests of package.json and extension.js without VS Code: the `vscode` module
// and vscode-languageclient's LanguageClient are replaced by fakes that record
// what the extension asks of them.
'use strict';
const assert = require('assert');
const fs = require('fs');
const Module = require('module');
const os = require('os');
const path = require('path');

const ROOT = path.join(__dirname, '..');

// ------------------------------------------------------------------ fakes
const calls = { errors: [], clients: [], commands: {}, executed: [] };
let config = {};
let configListener;
let errorChoice; // what the user clicks on an error message
let startBehaviour = () => Promise.resolve();

class FakeLanguageClient {
  constructor(id, name, serverOptions, clientOptions) {
    if (FakeLanguageClient.throwOnce) {
      const e = FakeLanguageClient.throwOnce;
      FakeLanguageClient.throwOnce = undefined;
      throw e;
    }
    Object.assign(this, { id, name, serverOptions, clientOptions, started: 0, stopped: 0, disposed: 0 });
    calls.clients.push(this);
  }
  start() {
    this.started++;
    return startBehaviour(this);
  }
  stop() {
    this.stopped++;
    return Promise.resolve();
  }
  dispose() {
    this.disposed++;
    return Promise.resolve();
  }
}

const fakeVscode = {
  workspace: {
    workspaceFolders: undefined,
    getConfiguration: (section) => {
      assert.strictEqual(section, 'rlhf');
      return { get: (key) => config[key] };
    },
    onDidChangeConfiguration: (listener) => {
      configListener = listener;
      return { dispose() {} };
    },
  },
  window: {
    createOutputChannel: () => ({ lines: [], appendLine(l) { this.lines.push(l); }, show() {}, dispose() {} }),
    showErrorMessage: (message, ...items) => {
      calls.errors.push({ message, items });
      return Promise.resolve(errorChoice);
    },
  },
  commands: {
    registerCommand: (id, fn) => {
      calls.commands[id] = fn;
      return { dispose() {} };
    },
    executeCommand: (...args) => {
      calls.executed.push(args);
      return Promise.resolve();
    },
  },
};
const fakeClientModule = { LanguageClient: FakeLanguageClient, TransportKind: { stdio: 0, ipc: 1, pipe: 2, socket: 3 } };

const realLoad = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === 'vscode') return fakeVscode;
  if (request === 'vscode-languageclient/node') return fakeClientModule;
  return realLoad.call(this, request, parent, isMain);
};
const ext = require('../extension.js');

// ------------------------------------------------------------------ helpers
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rlhf-vscode-test-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
function file(rel, mode) {
  const p = path.join(tmp, rel);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, '#!/bin/sh\nexit 0\n');
  fs.chmodSync(p, mode);
  return p;
}
const server = file('bin/rlhf-lsp-server', 0o755);
const otherServer = file('ws/build/bin/rlhf-lsp-server', 0o755);
file('notexec/rlhf-lsp-server', 0o644);
const flush = () => new Promise((r) => setTimeout(r, 10));

const tests = [];
const test = (name, fn) => tests.push([name, fn]);

// ------------------------------------------------------------------ manifest
test('package.json contributes the language, grammar, settings and command', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  assert.strictEqual(pkg.name, 'rlhf');
  assert.strictEqual(pkg.publisher, 'rlhfc');
  assert.ok(pkg.engines.vscode);
  assert.deepStrictEqual(pkg.activationEvents, ['onLanguage:rlhf']);
  assert.ok(fs.existsSync(path.join(ROOT, pkg.main)), 'main exists');
  const lang = pkg.contributes.languages.find((l) => l.id === 'rlhf');
  assert.deepStrictEqual(lang.extensions, ['.rlhf']);
  JSON.parse(fs.readFileSync(path.join(ROOT, lang.configuration), 'utf8'));
  const grammar = pkg.contributes.grammars.find((g) => g.language === 'rlhf');
  assert.strictEqual(grammar.scopeName, 'source.rlhf');
  const tm = JSON.parse(fs.readFileSync(path.join(ROOT, grammar.path), 'utf8'));
  assert.strictEqual(tm.scopeName, 'source.rlhf');
  const props = pkg.contributes.configuration.properties;
  assert.strictEqual(props['rlhf.server.path'].default, 'rlhf-lsp-server');
  assert.deepStrictEqual(props['rlhf.server.args'].default, []);
  assert.ok(props['rlhf.trace.server']);
  assert.ok(pkg.contributes.commands.some((c) => c.command === 'rlhf.restartServer'));
  for (const dep of Object.keys(pkg.dependencies)) assert.match(pkg.dependencies[dep], /^\d+\.\d+\.\d+$/, `${dep} pinned`);
  for (const dep of Object.keys(pkg.devDependencies)) assert.match(pkg.devDependencies[dep], /^\d+\.\d+\.\d+$/, `${dep} pinned`);
});

test('language-configuration.json: comments and brackets', () => {
  const c = JSON.parse(fs.readFileSync(path.join(ROOT, 'language-configuration.json'), 'utf8'));
  assert.strictEqual(c.comments.lineComment, '//');
  assert.deepStrictEqual(c.comments.blockComment, ['/*', '*/']);
  assert.strictEqual(c.brackets.length, 3);
  const inc = new RegExp(c.indentationRules.increaseIndentPattern);
  const dec = new RegExp(c.indentationRules.decreaseIndentPattern);
  assert.ok(inc.test('hardware A100_40GB {'));
  assert.ok(inc.test('  @place(   // comment'));
  assert.ok(!inc.test('model ref : tiny { }'));
  assert.ok(!inc.test('// a { in a comment'));
  assert.ok(dec.test('}'));
  const word = new RegExp(`^(?:${c.wordPattern})$`);
  for (const w of ['3.35TBps', '1e-6', '151_936', 'max_new_tokens']) assert.ok(word.test(w), w);
});

// ------------------------------------------------------------------ resolveServer
test('resolveServer: a bare name is looked up on PATH', () => {
  const env = { PATH: ['/nonexistent', path.join(tmp, 'notexec'), path.join(tmp, 'bin')].join(path.delimiter) };
  assert.strictEqual(ext.resolveServer('rlhf-lsp-server', env), server);
  assert.strictEqual(ext.resolveServer('', env), server, 'empty setting means the default name');
  assert.strictEqual(ext.resolveServer('rlhf-lsp-server', { PATH: '/nonexistent' }), undefined);
});

test('resolveServer: paths, relative paths, ${workspaceFolder}, ~', () => {
  const ws = path.join(tmp, 'ws');
  assert.strictEqual(ext.resolveServer(server, {}, ws), server);
  assert.strictEqual(ext.resolveServer('build/bin/rlhf-lsp-server', {}, ws), otherServer);
  assert.strictEqual(ext.resolveServer('${workspaceFolder}/build/bin/rlhf-lsp-server', {}, ws), otherServer);
  assert.strictEqual(ext.resolveServer(path.join(tmp, 'notexec/rlhf-lsp-server'), {}, ws), undefined, 'not executable');
  assert.strictEqual(ext.resolveServer(path.join(tmp, 'bin'), {}, ws), undefined, 'a directory');
  assert.strictEqual(ext.resolveServer('~/definitely/not/here/rlhf-lsp-server', {}, ws), undefined);
});

// ------------------------------------------------------------------ activate
const context = { subscriptions: [] };

test('activate: a missing server gives an error naming the setting and how to build it', async () => {
  config = { 'server.path': path.join(tmp, 'missing/rlhf-lsp-server'), 'server.args': [] };
  errorChoice = 'Open Settings';
  await ext.activate(context);
  await flush();
  assert.strictEqual(calls.clients.length, 0, 'no client without a server');
  assert.strictEqual(calls.errors.length, 1);
  const msg = calls.errors[0].message;
  assert.match(msg, /cannot find the language server '.*missing\/rlhf-lsp-server'/);
  assert.match(msg, /rlhf\.server\.path/);
  assert.match(msg, /scripts\/build\.sh rlhf-lsp-server/);
  assert.deepStrictEqual(calls.executed[0], ['workbench.action.openSettings', 'rlhf.server']);
  assert.ok(typeof calls.commands['rlhf.restartServer'] === 'function');
  assert.ok(typeof configListener === 'function');
});

test('a settings change starts the server over stdio with the configured args', async () => {
  config = { 'server.path': server, 'server.args': ['--log=verbose', 7] };
  configListener({ affectsConfiguration: (s) => s === 'rlhf.server' || s === 'rlhf' });
  await flush();
  assert.strictEqual(calls.clients.length, 1);
  const c = calls.clients[0];
  assert.strictEqual(c.id, 'rlhf');
  assert.deepStrictEqual(c.serverOptions.run, { command: server, args: ['--log=verbose', '7'], transport: 0 });
  // Saved files only: the server resolves file: URIs alone.
  assert.deepStrictEqual(c.clientOptions.documentSelector,
                         [ {scheme : 'file', language : 'rlhf'} ]);
  assert.strictEqual(c.started, 1);
  assert.strictEqual(calls.errors.length, 1, 'no new error');
});

test('an unrelated settings change does not restart', async () => {
  configListener({ affectsConfiguration: (s) => s === 'editor' });
  await flush();
  assert.strictEqual(calls.clients.length, 1);
  assert.strictEqual(calls.clients[0].stopped, 0);
});

test('the restart command stops the old client and starts a new one', async () => {
  await calls.commands['rlhf.restartServer']();
  assert.strictEqual(calls.clients.length, 2);
  assert.strictEqual(calls.clients[0].stopped, 1);
  assert.strictEqual(calls.clients[1].started, 1);
});

test('a server that fails to start gives an error and is disposed', async () => {
  startBehaviour = () => Promise.reject(new Error('spawn EACCES'));
  errorChoice = undefined;
  config = { 'server.path': server, 'server.args': [] };
  configListener({ affectsConfiguration: (s) => s === 'rlhf.server' });
  await flush();
  assert.strictEqual(calls.clients.length, 3);
  assert.strictEqual(calls.clients[1].stopped, 1);
  assert.strictEqual(calls.clients[2].disposed, 1);
  const msg = calls.errors[calls.errors.length - 1].message;
  assert.match(msg, /failed to start: spawn EACCES/);
  assert.ok(msg.includes(server));
  startBehaviour = () => Promise.resolve();
});

test('a client that throws is reported and later restarts still work', async () => {
  const before = calls.errors.length;
  FakeLanguageClient.throwOnce = new Error('bad client options');
  await calls.commands['rlhf.restartServer']();
  assert.strictEqual(calls.errors.length, before + 1);
  assert.match(calls.errors[before].message, /could not start the language client: bad client options/);
  const n = calls.clients.length;
  await calls.commands['rlhf.restartServer']();
  assert.strictEqual(calls.clients.length, n + 1);
  assert.strictEqual(calls.clients[n].started, 1);
});

test('deactivate stops the running client', async () => {
  const last = calls.clients[calls.clients.length - 1];
  assert.strictEqual(last.stopped, 0);
  await ext.deactivate();
  assert.strictEqual(last.stopped, 1);
});

(async () => {
  let failed = 0;
  for (const [name, fn] of tests) {
    try {
      await fn();
      console.log(`  ok   ${name}`);
    } catch (e) {
      failed++;
      console.log(`  FAIL ${name}\n${e.stack}`);
    }
  }
  console.log(`extension.test: ${tests.length - failed}/${tests.length} passed`);
  process.exit(failed ? 1 : 0);
})();
