# Sourced by the GPU experiment scripts: a model checked against the reference in forms of the
# GEMM template, and run under compute-sanitizer, each result a line in "$log" (and on stdout).
# Needs B (the unpacked bundle) and log set by the caller.

# check_forms MODEL FORM...: `run --check --gemm template` with each FORM's flags ("" the rule's).
check_forms() {
  local m=$1 form o
  shift
  for form in "$@"; do
    if o=$(timeout 300 "$B/tilefuse" run "$m" --backend cuda --check --gemm template $form 2>&1); then
      echo "PASS $m $form: $(echo "$o" | grep -o 'gemm template [^;]*' | head -1)" | tee -a "$log"
    else
      echo "FAIL $m $form" | tee -a "$log"; echo "$o" | tail -14 | tee -a "$log"
    fi
  done
}

# memcheck MODEL: compute-sanitizer's memcheck over one run on the template.
memcheck() {
  local m=$1 o
  if o=$(timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tilefuse" run "$m" --backend cuda --gemm template 2>&1); then
    echo "CLEAN $m" | tee -a "$log"
  else
    echo "MEMCHECK FAIL $m" | tee -a "$log"; echo "$o" | grep -v '^=========  ' | tail -15 | tee -a "$log"
  fi
}
