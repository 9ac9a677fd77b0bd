
${name}(${operands}) := ${value}
