; lsp-assist tags for Python (from tree-sitter-python's queries/tags.scm, extended).
; Captures: @name + @definition.<kind> (one symbol), @import (an import statement).
; References are left out: the index does not use them and they cost query time.

(module
  (expression_statement
    (assignment left: (identifier) @name) @definition.variable))

(class_definition
  body: (block
    (expression_statement
      (assignment left: (identifier) @name) @definition.variable)))

(class_definition
  name: (identifier) @name) @definition.class

(function_definition
  name: (identifier) @name) @definition.function

(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import
