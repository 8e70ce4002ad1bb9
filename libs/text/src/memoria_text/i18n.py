"""Every text shown to the user, in English and Portuguese (one catalogue: decision's notices
and replies, the action workers' status lines and errors, the offline planner's answers), and
a small language guess for picking them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from memoria_contracts.events import Language

# Words of one language that the other hardly uses ("do", "a", "no", "me", "as" and "e" are
# both, so neither list has them).
_PT_HINT_TEXT: Final = """
    que não nao você voce meu minha meus minhas é está esta estou isso isto para com uma um
    obrigado obrigada olá ola oi lembre lembra lembro qual quais quando onde porque por favor
    sim tudo bem apague esqueça esqueca anota guarde na verdade atualize eu sou tenho gosto
    em de da dos das o os ao aos mas muito também tambem foi moro trabalho ele ela eles seu
    sua mim hoje ontem amanhã amanha agora ainda já ja sobre chamo filha filho tem são anos
    faz mudei pra pode nome valeu tchau beleza legal bom dia boa tarde noite até ate logo
"""
_EN_HINT_TEXT: Final = """
    the is are you your my i what when where why please remember forget note yes thanks
    thank hello hi it this that does with about delete actually and of to in on at am was
    were have has had will would can could we our he she they his her an which who how not
    be been from now like live work moved name know tell there here just also but if or
    because
"""
_PT_HINTS: Final = frozenset(_PT_HINT_TEXT.split())
_EN_HINTS: Final = frozenset(_EN_HINT_TEXT.split())
_WORD = re.compile(r"[^\W\d_]+")
_PT_ONLY_LETTERS = re.compile(r"[ãõçâêôáéíóúà]", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?:\n]\s*$")

TEXTS: Final[dict[str, dict[Language, str]]] = {
    "thinking": {"en": "Thinking...", "pt": "Pensando..."},
    "quiet_broker": {
        "en": "The connection to the message broker is lost; reconnecting. Your message is "
        "kept and will be answered once it is back.",
        "pt": "A conexão com o broker de mensagens caiu; reconectando. Sua mensagem está "
        "guardada e será respondida assim que ela voltar.",
    },
    "quiet_service": {
        "en": "Still waiting: {services} is not answering right now. Your message is kept and "
        "will be answered once it is back.",
        "pt": "Ainda aguardando: {services} não está respondendo agora. Sua mensagem está "
        "guardada e será respondida assim que voltar.",
    },
    "quiet_slow": {
        "en": "Still working; this is taking longer than usual.",
        "pt": "Ainda trabalhando; está demorando mais do que o normal.",
    },
    "max_steps": {
        "en": "I stopped after {steps} steps without finishing. Please rephrase or try again.",
        "pt": "Parei depois de {steps} passos sem concluir. Reformule ou tente de novo.",
    },
    "step_timeout": {
        "en": "The step '{action}' took longer than {seconds:.0f}s, so I stopped here.",
        "pt": "O passo '{action}' passou de {seconds:.0f}s, então parei por aqui.",
    },
    "llm_error": {
        "en": "The language model is not answering right now ({detail}). Please try again.",
        "pt": "O modelo de linguagem não está respondendo agora ({detail}). Tente de novo.",
    },
    "no_workers": {
        "en": "No action worker is running, so I cannot act on your message yet.",
        "pt": "Nenhum action worker está rodando, então ainda não consigo agir.",
    },
    "history_unavailable": {
        "en": "The memory service is not answering; I will reply without earlier messages.",
        "pt": "O serviço de memória não está respondendo; vou responder sem as mensagens "
        "anteriores.",
    },
    "action_failed": {
        "en": "The step '{action}' failed: {detail}",
        "pt": "O passo '{action}' falhou: {detail}",
    },
    # Memory actions: status lines in the order each action runs its steps.
    "memory_search_started": {"en": "Searching memories...", "pt": "Buscando memórias..."},
    "memory_search_formatting": {
        "en": "Searching memories, formatting...",
        "pt": "Buscando memórias, formatando...",
    },
    "memory_search_searching": {
        "en": "Searching memories, searching...",
        "pt": "Buscando memórias, pesquisando...",
    },
    "memory_save_started": {"en": "Saving memories...", "pt": "Salvando memórias..."},
    "memory_save_formatting": {
        "en": "Saving memories, formatting...",
        "pt": "Salvando memórias, formatando...",
    },
    "memory_save_recording": {
        "en": "Saving memories, recording...",
        "pt": "Salvando memórias, gravando...",
    },
    "memory_update_started": {"en": "Updating memories...", "pt": "Atualizando memórias..."},
    "memory_update_recording": {
        "en": "Updating memories, recording...",
        "pt": "Atualizando memórias, gravando...",
    },
    "memory_delete_started": {"en": "Deleting memories...", "pt": "Apagando memórias..."},
    "memory_delete_deleting": {
        "en": "Deleting memories, deleting...",
        "pt": "Apagando memórias, deletando...",
    },
    # Memory actions: visible notices when a step cannot go on.
    "memory_search_invalid_plan": {
        "en": "I could not work out what to look for in your memories: the model's answer "
        "was not in the expected form.",
        "pt": "Não consegui definir o que procurar nas suas memórias: a resposta do modelo "
        "não veio no formato esperado.",
    },
    "memory_save_invalid_plan": {
        "en": "I could not work out which memories to save: the model's answer was not in "
        "the expected form.",
        "pt": "Não consegui definir quais memórias salvar: a resposta do modelo não veio no "
        "formato esperado.",
    },
    "memory_update_invalid_plan": {
        "en": "I could not work out which memories to update: the model's answer was not in "
        "the expected form.",
        "pt": "Não consegui definir quais memórias atualizar: a resposta do modelo não veio "
        "no formato esperado.",
    },
    "memory_delete_invalid_plan": {
        "en": "I could not work out which memories to delete: the model's answer was not in "
        "the expected form.",
        "pt": "Não consegui definir quais memórias apagar: a resposta do modelo não veio no "
        "formato esperado.",
    },
    "memory_unavailable": {
        "en": "The memory service is not answering right now, so I stopped this step. "
        "Please try again in a moment.",
        "pt": "O serviço de memória não está respondendo agora, então parei este passo. "
        "Tente de novo em instantes.",
    },
    "memory_storage_full": {
        "en": "I could not change your memories: the disk where they are kept is full, so "
        "nothing was saved. It works again as soon as space is freed.",
        "pt": "Não consegui alterar suas memórias: o disco onde elas ficam está cheio, então "
        "nada foi salvo. Volta a funcionar assim que houver espaço livre.",
    },
    "memory_rejected": {
        "en": "The memory service refused the request ({detail}), so I stopped this step.",
        "pt": "O serviço de memória recusou o pedido ({detail}), então parei este passo.",
    },
    # Commands that never reach the model (decision's fast_paths.py).
    "list_all_started": {"en": "Listing your memories...", "pt": "Listando suas memórias..."},
    "list_all_none": {
        "en": "You have no memories saved yet.",
        "pt": "Você ainda não tem memórias guardadas.",
    },
    "list_all_shown": {
        "en": "These are all your memories ({count}).",
        "pt": "Estas são todas as suas memórias ({count}).",
    },
    "list_all_newest": {
        "en": "These are your {count} newest memories; you have more. Ask me about a topic to "
        "find others, or open the memories drawer to see them all.",
        "pt": "Estas são as suas {count} memórias mais recentes; há mais. Pergunte sobre um "
        "assunto para achar outras, ou abra a gaveta de memórias para ver todas.",
    },
    # Worded so that it never reads as the offline planner's own delete-everything question.
    "delete_all_question": {
        "en": 'Delete every memory I have of you? This cannot be undone. Reply "yes" to '
        'delete them all, or "cancel" to keep them (I will wait {minutes} minutes).',
        "pt": "Apagar cada memória que tenho de você? Isso não pode ser desfeito. Responda "
        '"sim" para apagar tudo, ou "cancelar" para mantê-las (espero {minutes} minutos).',
    },
    "delete_all_done": {
        "en": "Done: I deleted all your memories ({count}).",
        "pt": "Pronto: apaguei todas as suas memórias ({count}).",
    },
    "delete_all_none": {
        "en": "You have no memories, so there was nothing to delete.",
        "pt": "Você não tem memórias, então não havia nada para apagar.",
    },
    "delete_all_partial": {
        "en": "I deleted {deleted} of your {total} memories; {failed} could not be deleted. "
        'Say "delete all my memories" again to retry.',
        "pt": "Apaguei {deleted} das suas {total} memórias; {failed} não puderam ser apagadas. "
        'Diga "apague todas as minhas memórias" de novo para tentar outra vez.',
    },
    "pending_cancelled": {
        "en": "Okay, cancelled: I did not delete anything.",
        "pt": "Tudo bem, cancelado: não apaguei nada.",
    },
    "nothing_to_cancel": {"en": "There is nothing to cancel.", "pt": "Não há nada para cancelar."},
    "update_choice_question": {
        "en": 'Which memory should become "{content}"?\n{candidates}\nReply with its number '
        '(or "cancel"); I will wait {minutes} minutes.',
        "pt": 'Qual memória deve passar a ser "{content}"?\n{candidates}\nResponda com o '
        'número (ou "cancelar"); espero {minutes} minutos.',
    },
    "update_chosen_done": {
        "en": 'Updated: "{old}" is now "{new}".',
        "pt": 'Atualizado: "{old}" agora é "{new}".',
    },
    "update_chosen_failed": {
        "en": 'I could not update "{old}": it is no longer among your memories.',
        "pt": 'Não consegui atualizar "{old}": ela não está mais entre suas memórias.',
    },
    "update_choice_cancelled": {
        "en": "Okay, cancelled: I did not change any memory.",
        "pt": "Tudo bem, cancelado: não alterei nenhuma memória.",
    },
    "update_choice_dropped": {
        "en": "I did not update any memory: your reply did not pick one, so I dropped that "
        "request.",
        "pt": "Não atualizei nenhuma memória: sua resposta não escolheu uma, então descartei "
        "aquele pedido.",
    },
    # "Forget that" (decision's fast_paths.py): the memory the user's last statement in the
    # thread saved or changed.
    "forget_done": {"en": 'Forgotten: "{content}".', "pt": 'Esqueci: "{content}".'},
    "forget_gone": {
        "en": "That memory is already gone, so there was nothing to forget.",
        "pt": "Essa memória já não existe, então não havia nada para esquecer.",
    },
    "forget_ask_what": {
        "en": 'What should I forget? Tell me what it is about, for example "forget my address".',
        "pt": 'O que devo esquecer? Diga do que se trata, por exemplo "esqueça meu endereço".',
    },
    "forget_choice_question": {
        "en": 'Which one should I forget?\n{candidates}\nReply with its number (or "cancel"); '
        "I will wait {minutes} minutes.",
        "pt": 'Qual devo esquecer?\n{candidates}\nResponda com o número (ou "cancelar"); '
        "espero {minutes} minutos.",
    },
    "forget_choice_cancelled": {
        "en": "Okay, cancelled: I did not forget anything.",
        "pt": "Tudo bem, cancelado: não esqueci nada.",
    },
    "forget_choice_dropped": {
        "en": "I did not forget anything: your reply did not pick one, so I dropped that request.",
        "pt": "Não esqueci nada: sua resposta não escolheu uma, então descartei aquele pedido.",
    },
    "pending_expired": {
        "en": "That question expired, so I did not delete anything. Ask again if you still "
        "want it.",
        "pt": "Aquela pergunta expirou, então não apaguei nada. Peça de novo se ainda quiser.",
    },
    "choice_expired": {
        "en": "That question expired, so I did not change or forget any memory. Ask again if "
        "you still want it.",
        "pt": "Aquela pergunta expirou, então não alterei nem esqueci nenhuma memória. Peça de "
        "novo se ainda quiser.",
    },
    # The action worker's reasons for a step that could not run (shown when the step ends
    # the cycle).
    "step_unavailable": {
        "en": "this worker does not offer it",
        "pt": "este worker não oferece esse passo",
    },
    "step_llm_failed": {
        "en": "the language model failed ({detail})",
        "pt": "o modelo de linguagem falhou ({detail})",
    },
    "step_internal_error": {
        "en": "internal error ({detail})",
        "pt": "erro interno ({detail})",
    },
    "step_cycle_ended": {
        "en": "stopped: the turn had already ended (timed out or cancelled)",
        "pt": "interrompido: a vez já tinha terminado (tempo esgotado ou cancelada)",
    },
    # What the offline planner (the rule-based stand-in for a model, libs/llm's offline
    # package) says: short templates filled from the memory actions' results.
    "offline_delete_all_question": {
        "en": "Do you really want me to delete ALL your memories? This cannot be undone. Reply "
        '"yes" to confirm, or anything else to keep them.',
        "pt": "Você quer mesmo que eu apague TODAS as suas memórias? Isso não pode ser "
        'desfeito. Responda "sim" para confirmar, ou qualquer outra coisa para '
        "mantê-las.",
    },
    "offline_saved": {
        "en": "Noted: {items}.",
        "pt": "Anotado: {items}.",
    },
    "offline_not_saved": {
        "en": "I could not save {items}.",
        "pt": "Não consegui guardar {items}.",
    },
    "offline_already_saved": {
        "en": "I already knew that: {items}.",
        "pt": "Isso eu já sabia: {items}.",
    },
    "offline_found_list": {
        "en": "Here is what I have:\n{items}",
        "pt": "Eis o que tenho:\n{items}",
    },
    "offline_listed": {
        "en": "Here is what I know about you:\n{items}",
        "pt": "Isto é o que sei sobre você:\n{items}",
    },
    "offline_listed_more": {
        "en": "…and {count} more: ask me about a topic, or open your memories to see them all.",
        "pt": "…e mais {count}: pergunte sobre um assunto, ou abra suas memórias para ver todas.",
    },
    "offline_found_unsure": {
        "en": 'Nothing I have is clearly about "{query}". The closest: {items}',
        "pt": 'Nada do que tenho é claramente sobre "{query}". O mais próximo: {items}',
    },
    "offline_found_none": {
        "en": 'I have nothing about "{query}" in your memories yet.',
        "pt": 'Ainda não tenho nada sobre "{query}" nas suas memórias.',
    },
    "offline_found_none_general": {
        "en": 'I have nothing about "{query}" in your memories, and with no language model '
        "configured I can only answer from what you told me.",
        "pt": 'Não tenho nada sobre "{query}" nas suas memórias, e sem um modelo de linguagem '
        "configurado só consigo responder a partir do que você me contou.",
    },
    "offline_told_none": {
        "en": "Nothing you told me in that time ({period}) is in memory.",
        "pt": "Nada do que você me disse nesse período ({period}) está na memória.",
    },
    "offline_listed_none": {
        "en": "You have no memories saved yet.",
        "pt": "Você ainda não tem memórias guardadas.",
    },
    "offline_updated": {
        "en": "Updated: {items}.",
        "pt": "Atualizei: {items}.",
    },
    "offline_deleted": {
        "en": "Forgotten: {items}.",
        "pt": "Esqueci: {items}.",
    },
    "offline_missing": {
        "en": "I could not find the memory to change ({items}).",
        "pt": "Não encontrei a memória para alterar ({items}).",
    },
    "offline_ask_missing": {
        "en": "I don't have that in my memory yet. Could you tell me?",
        "pt": "Ainda não tenho isso na memória. Pode me contar?",
    },
    "offline_no_answer": {
        "en": "All right. Tell me whenever you like, and I will remember it.",
        "pt": "Tudo bem. Quando quiser, me conte, e eu guardo.",
    },
    "offline_ask_more": {
        "en": "Could you tell me a bit more?",
        "pt": "Pode me contar um pouco mais?",
    },
    "offline_nothing_to_forget": {
        "en": 'I found no memory about "{query}", so I forgot nothing.',
        "pt": 'Não encontrei nenhuma memória sobre "{query}", então não esqueci nada.',
    },
    "offline_nothing_to_correct": {
        "en": 'I found no memory saying "{query}", so I changed nothing. Tell me the whole '
        "fact and I will keep it.",
        "pt": 'Não encontrei nenhuma memória que diga "{query}", então não mudei nada. Me '
        "conte o fato inteiro e eu guardo.",
    },
    "offline_ask_what_to_forget": {
        "en": 'What should I forget? Tell me what it is about, for example "forget my address".',
        "pt": 'O que devo esquecer? Diga do que se trata, por exemplo "esqueça meu endereço".',
    },
    "offline_cancelled": {
        "en": "Okay, cancelled.",
        "pt": "Tudo bem, cancelado.",
    },
    "offline_kept": {
        "en": "Okay, I kept all your memories.",
        "pt": "Tudo bem, mantive todas as suas memórias.",
    },
    "offline_failed": {
        "en": "Something went wrong: {detail}.",
        "pt": "Algo deu errado: {detail}.",
    },
    "offline_done": {
        "en": "Done.",
        "pt": "Pronto.",
    },
    "offline_thanks": {
        "en": "You're welcome!",
        "pt": "De nada!",
    },
    "offline_bye": {
        "en": "Bye! Your memories stay saved here.",
        "pt": "Tchau! Suas memórias ficam guardadas aqui.",
    },
    "offline_no_model": {
        "en": "(No language model is answering: I am Memoria's offline planner, so I keep, "
        "find, correct and forget what you tell me, by rules. Set GEMINI_API_KEY or an "
        "OpenAI-compatible server for full answers.)",
        "pt": "(Nenhum modelo de linguagem está respondendo: sou o planejador offline da "
        "Memoria, então guardo, encontro, corrijo e esqueço o que você me conta, por regras. "
        "Defina GEMINI_API_KEY ou um servidor compatível com OpenAI para respostas "
        "completas.)",
    },
    "offline_introduction": {
        "en": 'Hi! I can remember things for you ("remember that I am allergic to peanuts"), '
        'recall them ("what am I allergic to?"), correct them ("actually, ...") and '
        'forget them ("forget my allergy").',
        "pt": 'Olá! Posso guardar coisas para você ("lembre que sou alérgico a amendoim"), '
        'lembrar delas ("do que eu tenho alergia?"), corrigi-las ("na verdade, ...") e '
        'esquecê-las ("esqueça minha alergia").',
    },
    "offline_not_understood": {
        "en": "I'm not sure what to do with that. Tell me something to remember (\"I'm "
        'allergic to peanuts"), ask about it ("what am I allergic to?"), correct it '
        '("actually, ...") or forget it ("forget my allergy").',
        "pt": 'Não sei bem o que fazer com isso. Me conte algo para guardar ("sou alérgico a '
        'amendoim"), pergunte sobre isso ("do que eu tenho alergia?"), corrija ("na '
        'verdade, ...") ou peça para esquecer ("esqueça minha alergia").',
    },
    "offline_capabilities": {
        "en": "No language model is configured, so here is what I can do by rules:\n"
        '- remember what you tell me ("I\'m allergic to peanuts", "my sister is called Rita");\n'
        '- answer from it ("what am I allergic to?") and list it ("what do you know about '
        'me?");\n'
        '- correct it ("actually, my sister is called Rute") and forget it ("forget my '
        'allergy").\n'
        "Writing, explaining, translating, planning and free conversation need a model: set "
        "GEMINI_API_KEY or an OpenAI-compatible server.",
        "pt": "Nenhum modelo de linguagem está configurado, então eis o que faço por regras:\n"
        '- guardo o que você me conta ("sou alérgico a amendoim", "minha irmã se chama '
        'Rita");\n'
        '- respondo a partir disso ("do que eu tenho alergia?") e listo tudo ("o que você '
        'sabe sobre mim?");\n'
        '- corrijo ("na verdade, minha irmã se chama Rute") e esqueço ("esqueça minha '
        'alergia").\n'
        "Escrever, explicar, traduzir, planejar e conversar livremente precisam de um modelo: "
        "defina GEMINI_API_KEY ou um servidor compatível com OpenAI.",
    },
    "offline_cannot": {
        "en": "I can't do that: no language model is configured, so I only keep your "
        'memories. I can remember what you tell me ("I\'m allergic to peanuts"), answer from '
        'it ("what am I allergic to?"), correct it and forget it. To write, explain, '
        "translate, plan or chat, set GEMINI_API_KEY or an OpenAI-compatible server.",
        "pt": "Isso eu não consigo: nenhum modelo de linguagem está configurado, então só "
        'cuido das suas memórias. Posso guardar o que você me conta ("sou alérgico a '
        'amendoim"), responder a partir disso ("do que eu tenho alergia?"), corrigir e '
        "esquecer. Para escrever, explicar, traduzir, planejar ou conversar, defina "
        "GEMINI_API_KEY ou um servidor compatível com OpenAI.",
    },
    "pending_dropped": {
        "en": 'I did not delete your memories: your reply was not a "yes", so I dropped that '
        "request.",
        "pt": 'Não apaguei suas memórias: sua resposta não foi um "sim", então descartei aquele '
        "pedido.",
    },
}


def detect_language(text: str, earlier: Iterable[str] = ()) -> Language:
    """Portuguese or English, by the words of each language a message uses. An accented
    letter counts for Portuguese, except in a capitalised word inside a sentence: a name ("the
    Charité hospital", "I moved to São Paulo") says nothing about the language it is
    mentioned in. A message that does not tell ("Lena", "ok", "Tokyo 5/6") is in the language
    of the first of ``earlier`` (the user's previous messages, newest first) that does;
    English when none does."""
    for candidate in (text, *earlier):
        if (language := language_of(candidate)) is not None:
            return language
    return "en"


def language_of(text: str) -> Language | None:
    """The language ``text`` itself tells, or None when it does not ("ok", "Lena", "3")."""
    pt = en = 0
    accented = False
    for match in _WORD.finditer(text):
        word = match.group()
        lower = word.lower()
        if lower in _PT_HINTS:
            pt += 1
        elif lower in _EN_HINTS:
            en += 1
        elif _PT_ONLY_LETTERS.search(word):
            accented = True
            if not _is_name(text, match.start(), word):
                pt += 1
    if pt != en:
        return "pt" if pt > en else "en"
    return "pt" if accented else None


def _is_name(text: str, start: int, word: str) -> bool:
    """A capitalised word that does not start a sentence."""
    before = text[:start]
    return word[:1].isupper() and bool(before.strip()) and not _SENTENCE_END.search(before)


def text(key: str, language: Language, **values: object) -> str:
    return TEXTS[key][language].format(**values)
