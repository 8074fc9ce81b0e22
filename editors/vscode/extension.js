// Starts `auditc lsp` (setting auditlang.server.command) for .audit files over stdio.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("auditlang").get("server.command", ["auditc", "lsp"]);
  client = new LanguageClient(
    "auditlang",
    "auditlang",
    { command, args },
    { documentSelector: [{ scheme: "file", language: "audit" }, { scheme: "untitled", language: "audit" }] },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
