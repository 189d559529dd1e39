// Package render is Grapnel's ConfigRenderer: it renders the handlebars
// templates in a workload's agent, runtimeConfig and file contents with the
// config items the workload maps in its `configs` field
// (swdd~config-renderer-renders-workload-configuration~2). Template
// parsing and execution are delegated to github.com/aymerick/raymond
// (swdd~server-delegate-template-render-to-external-library~1).
//
// Ankaios renders with handlebars-rust in strict mode and without HTML
// escaping. raymond has neither, and a few habits that would hurt here, so
// a template goes through these steps before raymond executes it:
//
//   - Grammar check. raymond's parser leaves its lexer goroutine blocked
//     forever when it meets a syntax error. The template is therefore
//     tokenised with raymond's lexer (which always runs to the end) and
//     checked against raymond's grammar by recognizer.go; raymond's parser
//     only ever sees templates it accepts.
//   - Source rewrite. A path segment that starts with a digit, as in
//     `{{cfg.values.0}}`, becomes `[0]`: raymond's lexer would read it as
//     a number, handlebars-rust reads it as a list index. Every plain
//     `{{x}}` becomes `{{&x}}`, raymond's unescaped form, so `"`, `<` and
//     `&` pass through. Every
//     `{{> indent content=P}}` becomes a call of the private helper `$`
//     that carries the leading whitespace of its source line; as a mustache
//     it escapes raymond's standalone-partial handling, which would eat the
//     line break after the tag.
//   - Strict check. check.go walks the parsed AST with the real config
//     values before raymond runs. It resolves every path exactly as raymond
//     will (resolve.go ports raymond's lookup rules: parent-context
//     fallback, @data, block params, `../`, `this`, list indexes such as
//     `values.0`), follows #if/#unless into the branch that will run and
//     #each/#with into every element, and rejects a reference to a value
//     that does not exist. It also rejects what raymond would get wrong or
//     crash on: negative list indexes, lookups against a list context,
//     @-variables without a name, helpers other than
//     if/unless/each/with/lookup, partials other than indent, and
//     sub-expressions.
//   - Execution. raymond runs the template with two template-local
//     helpers: `$` for indent and an `each` that walks maps in key order,
//     so the output, and with it the instance id, is deterministic.
//
// Strictness follows handlebars-rust where it has a rule: the condition of
// #if/#unless may be missing (it counts as false); the value of #each and
// #with must exist unless the block has an {{else}}. Name lookup follows
// raymond: a name not found in the current context (say inside #each) is
// looked up in the enclosing ones, as in mustache; `../x` and `@root.x`
// work as in handlebars. Rendering a list or a map as text is an error.
// The package registers no global raymond helpers and relies on nobody
// else doing so, since a global helper would shadow a config alias.
//
// Parsed templates are cached by source text in a bounded cache, so the
// renderer is cheap to call on every state update
// (swdd~server-state-triggers-configuration-rendering-of-workloads~1).
package render
