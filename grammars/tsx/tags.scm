; inherits: typescript
; lsp-assist tags for TSX: the TypeScript query (the grammar differs only by JSX).
