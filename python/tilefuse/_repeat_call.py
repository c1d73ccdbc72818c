"""A compiled torch.compile graph's calls on the GPU whose arguments are, but for a few, the
last call's tensors where they were: a decode step's weights and KV cache stay put while its
token ids, position and logits are new at every step.

The general path (torch_backend._Specialization.run down to CompiledModel.run_device) takes a
decode step ~75 us of host time on the development machine, against the ~260 us the whole step
runs on an H100: the graph's inputs gathered from the arguments, their pointers read, the outputs
gathered with the inputs written in place, two lists of ~220 pointers converted for the runtime,
then the outputs picked again. Here a call checks that the steady arguments are where they were
(one C pass, as CUDA graph trees check their static inputs), reads the few others, allocates the
fresh outputs and sends only the pointers that moved (HeldDevicePointers), the rest of the
runtime's call as before.
"""
import operator
from typing import Any, List, Optional, Sequence


class RepeatCall:
    """Built from a call the general path ran: the held pointers of that call (steady and
    moving inputs as CompiledModel's _HeldPointers learnt them), the arguments each graph input
    is (`argument_of`: the translation's positions), and the outputs written into inputs
    (`into`: InPlaceOutputs, or None where the graph updates no input). Every update of an
    input must be written in place (nothing to copy after the run)."""

    kSettle = 16  # calls a moving argument's pointer must stay put before it is checked as steady

    def __init__(self, torch: Any, model: Any, argument_of: Sequence[int], into: Any, outputs_of: Any, mutations: int,
                 tilefuse: Any):
        held = model._held_pointers
        pointers = list(held._pointers)
        self._inputs = len(pointers)
        self._equal = torch._C._tensors_data_ptrs_at_indices_equal
        self._argument_of = list(argument_of)
        arguments = max(self._argument_of) + 1 if self._argument_of else 0
        # Per argument position: its pointer where a graph input reads it (the steady check's table).
        self._pointer_at = [0] * arguments
        for n, p in enumerate(self._argument_of):
            self._pointer_at[p] = pointers[n]
        # The outputs written into inputs (output -> input) and the others, allocated at each call.
        written_into = dict(into.pairs) if into is not None else {}
        outputs = len(model._device_outputs)
        self._fresh = [o for o in range(outputs) if o not in written_into]
        self._into_of = {}  # input -> the output entries that are its memory
        for o, n in written_into.items():
            self._into_of.setdefault(n, []).append(self._inputs + o)
        self._fresh_entries = [self._inputs + o for o in self._fresh]
        self._held = tilefuse.HeldDevicePointers(pointers, [pointers[written_into[o]] if o in written_into else 0
                                                            for o in range(outputs)])
        self._graph = model._graph
        self._empty_outputs = model._empty_outputs
        self._stream = model._current_stream
        self._outputs_of = outputs_of
        # The caller's outputs are the graph's first ones (the updates come last and are dropped).
        self._mutation_padding = [None] * mutations
        self._set_moving([n for n in held._moving])
        self._calls = 0

    def _set_moving(self, moving: List[int]) -> None:
        self._moving = sorted(moving)
        moving_set = set(self._moving)
        self._steady = sorted(self._argument_of[n] for n in range(self._inputs) if n not in moving_set)
        self._moving_arguments = [self._argument_of[n] for n in self._moving]
        # The entries a moving input's pointer sets: its own and the outputs written into it.
        self._moving_entries = [[n] + self._into_of.get(n, []) for n in self._moving]
        self._since = [self._pointer_at[p] for p in self._moving_arguments]
        self._plain_moving = all(len(e) == 1 for e in self._moving_entries)
        self._take = operator.itemgetter(*self._moving_arguments) if len(self._moving_arguments) > 1 else None

    def __call__(self, args: List[Any]) -> Optional[list]:
        """The call's outputs as the general path gives them, or None where an argument moved
        that was steady, or a moving one is not dense (the general path then runs it)."""
        if not self._equal(args, self._pointer_at, self._steady):
            return None
        entries, pointers = [], []
        moving = self._take(args) if self._take is not None else [args[p] for p in self._moving_arguments]
        for x, e in zip(moving, self._moving_entries):
            if not x.is_contiguous():
                return None
            pointer = x.data_ptr()
            for entry in e:
                entries.append(entry)
                pointers.append(pointer)
        fresh = self._empty_outputs(only=self._fresh)
        entries += self._fresh_entries
        pointers += [o.data_ptr() for o in fresh]
        self._held.run(self._graph, entries, pointers, self._stream())
        self._calls += 1
        if self._calls % self.kSettle == 0 and self._moving:
            self._settle(moving)
        return self._outputs_of(fresh + self._mutation_padding, args)

    def _settle(self, moving: Sequence[Any]) -> None:
        """The moving arguments whose pointers stayed put over the last kSettle calls are
        checked as steady from now on (a new KV cache's, some steps after it came)."""
        now = [x.data_ptr() for x in moving]
        settled = [n for n, a, b in zip(self._moving, now, self._since) if a == b]
        for p, pointer in zip(self._moving_arguments, now):
            self._pointer_at[p] = pointer
        if settled:
            self._set_moving([n for n in self._moving if n not in set(settled)])
        else:
            self._since = now
