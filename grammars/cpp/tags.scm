; lsp-assist tags for C++ (from tree-sitter-cpp's queries/tags.scm, extended).
; A qualified name (ns::K::m) yields the symbol m with parent K (split in code).

(function_definition
  declarator: [
    (function_declarator declarator: (_) @name)
    (pointer_declarator declarator: (function_declarator declarator: (_) @name))
    (reference_declarator (function_declarator declarator: (_) @name))
  ]) @definition.function

(declaration
  declarator: [
    (function_declarator declarator: (_) @name)
    (pointer_declarator declarator: (function_declarator declarator: (_) @name))
  ]) @definition.function

(field_declaration
  declarator: (function_declarator declarator: (_) @name)) @definition.method

(class_specifier name: (_) @name body: (_)) @definition.class
(struct_specifier name: (_) @name body: (_)) @definition.struct
(union_specifier name: (_) @name body: (_)) @definition.struct
(enum_specifier name: (_) @name body: (_)) @definition.enum
(type_definition declarator: (type_identifier) @name) @definition.type
(alias_declaration name: (type_identifier) @name) @definition.type
(namespace_definition name: (_) @name) @definition.module
(preproc_def name: (identifier) @name) @definition.constant
(preproc_function_def name: (identifier) @name) @definition.function

(translation_unit
  (declaration
    declarator: (init_declarator declarator: (identifier) @name)) @definition.variable)

(preproc_include) @import
