
${name}(${operands}) := strings.replace_n({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}, ${builtin}(${keyed}))
