/* test/fuzz/seeds/fake_luajit.S: a tiny shared object that passes LuaJIT
 * detection (unwind/luajit/detect.c) the way a real libluajit does: the Lua
 * C API plus luaJIT_setmode/luaopen_jit exported, one FDE under a "zPR" CIE
 * with the VM's exact CFI (def_cfa_offset 80, rbp/rbx/r15/r14 saved),
 * lua_pcall/lua_call/lua_resume calling into it, and the ".rodata" strings
 * for GC64 and the version. A seed for elf_fuzz: mutations start from a file
 * that reaches runtime creation and the splice. */
        .text
        .globl  lua_pcall
        .type   lua_pcall, @function
lua_pcall:
        .cfi_startproc
        subq    $8, %rsp
        .cfi_def_cfa_offset 16
        call    lj_vm_asm_begin
        addq    $8, %rsp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size   lua_pcall, .-lua_pcall

        .globl  lua_call
        .type   lua_call, @function
lua_call:
        .cfi_startproc
        jmp     lj_vm_asm_begin
        .cfi_endproc
        .size   lua_call, .-lua_call

        .globl  lua_resume
        .type   lua_resume, @function
lua_resume:
        .cfi_startproc
        pushq   %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset rbx, -16
        call    lj_vm_asm_begin
        popq    %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size   lua_resume, .-lua_resume

        .globl  luaJIT_setmode
        .type   luaJIT_setmode, @function
luaJIT_setmode:
        xorl    %eax, %eax
        ret
        .size   luaJIT_setmode, .-luaJIT_setmode

        .globl  luaopen_jit
        .type   luaopen_jit, @function
luaopen_jit:
        movl    $1, %eax
        ret
        .size   luaopen_jit, .-luaopen_jit

        .globl  lj_err_unwind_dwarf
        .type   lj_err_unwind_dwarf, @function
lj_err_unwind_dwarf:
        xorl    %eax, %eax
        ret
        .size   lj_err_unwind_dwarf, .-lj_err_unwind_dwarf

        .type   lj_vm_asm_begin, @function
lj_vm_asm_begin:
        .cfi_startproc
        .cfi_personality 0x9b, DW.ref.lj_err_unwind_dwarf
        .cfi_def_cfa_offset 80
        .cfi_offset rbp, -16
        .cfi_offset rbx, -24
        .cfi_offset r15, -32
        .cfi_offset r14, -40
        nop
        nop
        movq    %rbx, %rax
        addq    $8, %rax
        ret
        .fill   1024, 1, 0x90
        .cfi_endproc
        .size   lj_vm_asm_begin, .-lj_vm_asm_begin


        .hidden DW.ref.lj_err_unwind_dwarf
        .weak   DW.ref.lj_err_unwind_dwarf
        .section .data.rel.local.DW.ref.lj_err_unwind_dwarf,"awG",@progbits,DW.ref.lj_err_unwind_dwarf,comdat
        .align  8
        .type   DW.ref.lj_err_unwind_dwarf, @object
        .size   DW.ref.lj_err_unwind_dwarf, 8
DW.ref.lj_err_unwind_dwarf:
        .quad   lj_err_unwind_dwarf

        .section .rodata
        .ascii  "\002le\004gc64"
        .byte   0
        .asciz  "LuaJIT 2.1.0-beta3"

        .section .note.GNU-stack,"",@progbits
