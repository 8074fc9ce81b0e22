"""The bottom layer: request/result contract, engine config and static capabilities, errors and diagnostics. Imports nothing else of auditlang."""
