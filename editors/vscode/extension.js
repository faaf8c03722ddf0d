// VS Code client for rlhf-lsp-server: starts the server named by the
// `rlhf.server.path` setting over stdio for .rlhf files, shows a clear error
// when it cannot be found or started, and restarts it when the `rlhf.server.*`
// settings change or on the "RLHF: Restart Language Server" command.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

const SECTION = 'rlhf';
const DEFAULT_SERVER = 'rlhf-lsp-server';
const BUILD_HINT =
  'Build it with `scripts/build.sh rlhf-lsp-server` (it lands in build/bin/) ' +
  'and set "rlhf.server.path" to its path, or put it on PATH.';

let client;
let output;
let starting = Promise.resolve();

function workspaceFolder() {
  const folders = vscode.workspace.workspaceFolders;
  return folders && folders.length ? folders[0].uri.fsPath : undefined;
}

function isExecutableFile(file) {
  try {
    if (!fs.statSync(file).isFile()) return false;
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// Resolves the `rlhf.server.path` setting to an executable file, or returns
// undefined. `~` and `${workspaceFolder}` are expanded; a relative path with a
// separator is taken from the first workspace folder; a bare name is looked
// up on PATH.
function resolveServer(setting, env = process.env, folder = workspaceFolder()) {
  let p = (setting || '').trim() || DEFAULT_SERVER;
  if (p === '~' || p.startsWith('~/')) p = path.join(os.homedir(), p.slice(1));
  if (folder) p = p.replace(/\$\{workspaceFolder\}/g, folder);
  if (p.includes('/') || p.includes(path.sep)) {
    if (!path.isAbsolute(p)) p = path.resolve(folder || process.cwd(), p);
    return isExecutableFile(p) ? p : undefined;
  }
  const exts = process.platform === 'win32' ? ['', ...(env.PATHEXT || '.EXE;.CMD;.BAT').split(';')] : [''];
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, p + ext);
      if (isExecutableFile(candidate)) return candidate;
    }
  }
  return undefined;
}

function settings() {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const args = cfg.get('server.args');
  return {
    path: cfg.get('server.path') || DEFAULT_SERVER,
    args: Array.isArray(args) ? args.map(String) : [],
  };
}

async function showError(message) {
  if (output) output.appendLine(message);
  const choice = await vscode.window.showErrorMessage(message, 'Open Settings', 'Show Log');
  if (choice === 'Open Settings') {
    await vscode.commands.executeCommand('workbench.action.openSettings', 'rlhf.server');
  } else if (choice === 'Show Log' && output) {
    output.show(true);
  }
}

async function startClient() {
  const { path: setting, args } = settings();
  const command = resolveServer(setting);
  if (!command) {
    // Not awaited: the error message stays up while activation finishes.
    showError(`RLHF: cannot find the language server '${setting}'. ${BUILD_HINT}`);
    return;
  }
  const serverOptions = {
    run: { command, args, transport: TransportKind.stdio },
    debug: { command, args, transport: TransportKind.stdio },
  };
  const clientOptions = {
    documentSelector : [
      // Files only: MLIR's LSP library resolves no other scheme, and an
      // unsaved editor has no folder to search its imports from.
      {scheme : 'file', language : 'rlhf'},
    ],
    outputChannel : output,
  };
  const c = new LanguageClient(SECTION, 'RLHF Language Server', serverOptions, clientOptions);
  client = c;
  try {
    await c.start();
    output.appendLine(`RLHF: started ${command}${args.length ? ' ' + args.join(' ') : ''}`);
  } catch (err) {
    if (client === c) client = undefined;
    try {
      await c.dispose();
    } catch {
      // The client never got going; nothing to release.
    }
    showError(`RLHF: the language server '${command}' failed to start: ${describe(err)}. ${BUILD_HINT}`);
  }
}

async function stopClient() {
  const c = client;
  client = undefined;
  if (!c) return;
  try {
    await c.stop();
  } catch (err) {
    if (output) output.appendLine(`RLHF: stopping the language server: ${describe(err)}`);
  }
}

function describe(err) {
  return err && err.message ? err.message : String(err);
}

// Serialises restarts so that quick successive setting changes do not race.
// A failure is reported and does not break the chain for later restarts.
function restart() {
  starting = starting
    .then(stopClient)
    .then(startClient)
    .catch((err) => {
      showError(`RLHF: could not start the language client: ${describe(err)}`);
    });
  return starting;
}

function activate(context) {
  output = vscode.window.createOutputChannel('RLHF Language Server');
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand('rlhf.restartServer', restart),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('rlhf.server')) restart();
    }),
  );
  return restart();
}

function deactivate() {
  starting = starting.then(stopClient);
  return starting;
}

module.exports = { activate, deactivate, resolveServer };
