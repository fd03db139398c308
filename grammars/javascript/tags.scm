; lsp-assist tags for JavaScript (from tree-sitter-javascript's queries/tags.scm, extended).
; Captures: @name + @definition.<kind>, @import. A variable whose value is a function
; becomes a function in code; ALL_CAPS variables become constants.

(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (_) @name) @definition.class
(method_definition name: (_) @name) @definition.method

(program
  (lexical_declaration
    (variable_declarator name: (identifier) @name) @definition.variable))
(program
  (variable_declaration
    (variable_declarator name: (identifier) @name) @definition.variable))
(program
  (export_statement
    declaration: (lexical_declaration
      (variable_declarator name: (identifier) @name) @definition.variable)))
(program
  (export_statement
    declaration: (variable_declaration
      (variable_declarator name: (identifier) @name) @definition.variable)))

(program
  (expression_statement
    (assignment_expression
      left: (member_expression property: (property_identifier) @name)
      right: [(arrow_function) (function_expression)]) @definition.function))

(import_statement) @import
(export_statement source: (string)) @import
((call_expression
   function: (identifier) @_require
   arguments: (arguments . (string))) @import
 (#eq? @_require "require"))
