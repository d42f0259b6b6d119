"""The boundary: modes (which tools exist), confirmation of destructive calls, the audit log, redaction of every
output, and the HTTP guard."""
