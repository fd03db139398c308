; lsp-assist tags for Rust (from tree-sitter-rust's queries/tags.scm, extended).
; @scope/@scope.name: an impl block, the parent of the functions inside it.
; A `mod foo;` declaration is both a module symbol and an import.

(struct_item name: (type_identifier) @name) @definition.struct
(union_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(type_item name: (type_identifier) @name) @definition.type
(trait_item name: (type_identifier) @name) @definition.interface
(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.function
(mod_item name: (identifier) @name) @definition.module
(macro_definition name: (identifier) @name) @definition.function
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.variable

(impl_item type: (_) @scope.name) @scope

(mod_item !body) @import
(use_declaration) @import
(extern_crate_declaration) @import
