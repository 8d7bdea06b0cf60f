#!/usr/bin/env python3
# Digest of the machine code in CUDA objects, to show that a change left kernels unedited: one line per kernel,
# "<sha256 of its .text section> <section name>", from the cubin inside each object's .nv_fatbin (no cuobjdump
# needed). Anonymous-namespace names (_GLOBAL__N__<file>_<hash>) are masked: nvcc derives the hash from the
# preprocessed source, so it changes with any included header even when the code does not.
#   scripts/cuda_kernel_digest.py before/x.cu.o > a; scripts/cuda_kernel_digest.py build/.../x.cu.o > b; diff a b
import hashlib, re, struct, subprocess, sys, tempfile
def cubin_of(obj):
    with tempfile.NamedTemporaryFile() as f:
        subprocess.run(['objcopy', '-O', 'binary', '--only-section=.nv_fatbin', obj, f.name], check=True)
        fat = open(f.name, 'rb').read()
    i = fat.find(b'\x7fELF')
    assert i >= 0, obj
    return fat[i:]
def sections(elf):
    shoff, = struct.unpack_from('<Q', elf, 0x28); shentsize, shnum, shstrndx = struct.unpack_from('<HHH', elf, 0x3A)
    hdr = lambda k: struct.unpack_from('<IIQQQQIIQQ', elf, shoff + k * shentsize)
    stro = hdr(shstrndx)[4]
    out = {}
    for k in range(shnum):
        name_off, typ, flags, addr, off, size = hdr(k)[:6]
        name = elf[stro + name_off: elf.index(b'\0', stro + name_off)].decode()
        if name.startswith('.text.'):
            out[re.sub(r'\d*_GLOBAL__N__\w*?_cu_[0-9a-f]{8}(_\d+)?', 'ANON', name)] = hashlib.sha256(elf[off:off + size]).hexdigest()[:16]
    return out
for obj in sys.argv[1:]:
    for name, digest in sorted(sections(cubin_of(obj)).items()):
        print(digest, name)
