; lsp-assist tags for Go (from tree-sitter-go's queries/tags.scm, extended).
; A method's parent is its receiver type (found in code).

(function_declaration name: (identifier) @name) @definition.function
(method_declaration name: (field_identifier) @name) @definition.method

(type_declaration
  (type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct)
(type_declaration
  (type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface)
(type_declaration
  (type_spec name: (type_identifier) @name) @definition.type)
(type_declaration
  (type_alias name: (type_identifier) @name) @definition.type)

(source_file
  (const_declaration (const_spec name: (identifier) @name) @definition.constant))
(source_file
  (var_declaration (var_spec name: (identifier) @name) @definition.variable))
(source_file
  (var_declaration (var_spec_list (var_spec name: (identifier) @name) @definition.variable)))

(import_declaration) @import
