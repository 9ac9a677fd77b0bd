
${name}(a0, a1) := v if {
	v := __rk_b_patched(a0, a1)
} else := ${fail}("json.patch: the patch does not apply to the document")
