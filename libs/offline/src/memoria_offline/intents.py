"""What the user wants, from cue words in English and Portuguese — no model involved.

The rules are ordered from the most specific to the least ("forget everything" before
"forget ...", "actually ..." before a plain statement), and every one runs on folded text
(lower case, no accents), so "Você lembra" and "voce lembra" are the same. ``statement`` is
the part of the message after the cue, in the user's own words: what to save, what to look
for, the correction, what to forget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from memoria_offline import lexicon
from memoria_offline.facts import introduces
from memoria_offline.person import first_person_verb
from memoria_text import commands
from memoria_text.folding import Folded, fold, is_question, strip_edges, tidy
from memoria_text.relative_dates import find_relative_dates


class Intent(StrEnum):
    SAVE = "save"
    SEARCH = "search"
    UPDATE = "update"
    DELETE = "delete"
    LIST_ALL = "list_all"
    DELETE_ALL = "delete_all"
    CONFIRM = "confirm"
    CANCEL = "cancel"
    CANNOT = "cannot"
    """A request the rules cannot serve (write, explain, translate, plan, chat): answered
    with what Memoria does without a model; nothing is searched or saved."""
    CAPABILITIES = "capabilities"
    """"What can you do?": what Memoria does without a model."""
    SMALL_TALK = "small_talk"


@dataclass(frozen=True)
class Reading:
    intent: Intent
    statement: str
    """The user's words after the cue (the whole message when there is no cue)."""
    about_user: bool = False
    """A question about the user ("what is MY ..."): if memory has nothing, ask them."""
    facts: tuple[str, ...] = ()
    """What to save, one memory each: the statement's clauses when each is a fact of its own
    ("I'm Marco and I live in Berlin"), else the statement."""
    refers_back: bool = False
    """A forget of "that": the memory the user's last statement saved or changed
    (``CycleView``)."""
    forget_what: bool = False
    """A forget of "that" with nothing told to forget: the user is asked what."""
    unread: bool = False
    """No rule understood the message (small talk by default; ``statement`` as typed, not
    capitalised): it may answer a question the planner asked (``CycleView``)."""
    courtesy: tuple[str, ...] = ()
    """Small talk that thanks ("thanks"), takes leave ("bye") or both: answered in kind."""
    old_value: str = ""
    """A correction's words for what is wrong ("coffee" of "tea, not coffee", "Rute" of
    "minha irmã se chama Rita, não Rute"): the memory it corrects holds them."""
    substitution: bool = False
    """A correction that gives the new value alone ("not coffee, tea"): ``statement`` takes
    the place of ``old_value`` in the memory it corrects."""
    told_when: str | None = None
    """A question about what the user told at a time ("what did I tell you last week?"):
    the words after the cue, the time included ("about Porto last week"). Its memories are
    those told then (``CycleView.window``)."""


NAMES_A_TIME: Final = datetime(2000, 1, 1, tzinfo=UTC)
"""Any day: whether a text names a time does not depend on when it was said."""


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# Greetings, thanks, politeness and the assistant's name before the request: "Thanks!
# Remember that…", "Bom dia! Meu nome é Ana" are the request that follows (longer phrases
# first: "bom dia" before "bom").
_COURTEOUS_TEXT: Final = (
    r"thank you(?: (?:so|very) much)?|thanks(?: a lot)?|many thanks|thx|cheers|"
    r"good (?:morning|afternoon|evening|night)|how are you(?: doing)?|how's it going|"
    r"muito obrigad[oa]|obrigad[oa]|brigad[oa]|valeu|bom dia|boa tarde|boa noite|tudo bem|"
    r"tudo bom|como vai|great|nice|cool|awesome|perfect|otimo|legal|beleza|perfeito"
)
_LEAD_IN: Final = _rx(
    rf"^(?:(?:{_COURTEOUS_TEXT}|(?:hey|hi|hello)(?: there| again)?|ok|okay|so|well|please|"
    r"pls|oi|ola|por favor|entao|bom|memoria)(?:\b|$)[\s,!.:?]*)+"
)
# Courtesy before words no rule reads ("Nice to meet you", "thanks for remembering") is small
# talk, not an answer to a question the planner asked (``Reading.unread``).
_COURTEOUS: Final = _rx(rf"\b(?:{_COURTEOUS_TEXT})\b")
# What a message of courtesy alone is answered with (``Reading.courtesy``).
_THANKS: Final = _rx(r"\b(?:thank|thanks|thx|cheers|obrigad[oa]|brigad[oa]|valeu)\b")
_BYE: Final = _rx(r"\b(?:bye|goodbye|see you|good night|tchau|ate logo|ate mais|ate amanha)\b")

# The commands' words are the ones the runtime recognizes before any model call
# (memoria_text.commands); here they are cues that may start a longer message.
_DELETE_ALL: Final = _rx(
    r"^(?:(?:can you|could you|pode|voce pode) )?"
    rf"(?:{commands.DELETE_VERBS_EN}|{commands.DELETE_VERBS_PT})\b.*"
    r"\b(?:everything|all (?:of )?(?:my |the |your )?(?:memories|data|you know)|all about me|"
    r"tudo|todas as (?:minhas )?memorias|todas (?:as )?memorias|todas as coisas)\b"
)
_CONFIRM: Final = _rx(rf"^(?:{commands.YES_EN}|{commands.YES_PT})\b")
# Besides the commands' cancel, what answers a question the planner asked with nothing.
_CANCEL: Final = _rx(
    rf"^(?:{commands.CANCEL_EN}|{commands.CANCEL_PT}|stop|no thanks|no,? thank you|nothing|no|"
    r"nope|nada|nao|para)\W*$"
)
_LIST_ALL: Final = _rx(
    rf"\b(?:(?:{commands.LIST_VERBS_EN}|tell me|give me) (?:me )?(?:all )?(?:of )?"
    r"(?:my |your |the )?(?:memories|saved facts|notes)|"
    r"what do you (?:know|remember) about me|what have you "
    r"(?:saved|stored|remembered|memorized)|everything you (?:know|remember) about me|"
    rf"(?:{commands.LIST_VERBS_PT}|quais sao) (?:todas )?(?:as )?(?:minhas )?"
    r"memorias|o que (?:voce|vc) (?:sabe|lembra|guardou|salvou) (?:sobre|de) mim|"
    r"tudo (?:o )?que (?:voce|vc) (?:sabe|lembra) (?:sobre|de) mim)\b|"
    r"^(?:tell me everything|what do you (?:know|remember)|o que (?:voce|vc) (?:sabe|lembra))"
    r"\W*$"
)
# "Forget that", "forget it", "esqueça isso", "undo": what the user told last (right after
# the delete-everything question, a "no": ``CycleView``).
_FORGET_THAT: Final = _rx(
    rf"^(?:please )?(?:{commands.ERASE_VERBS_EN}|{commands.ERASE_VERBS_PT}|"
    rf"{commands.FORGET_VERBS_PT}) (?:{commands.THAT_EN}|{commands.THAT_PT})\W*$|"
    r"^(?:undo|undo that|desfaz|desfazer|desfaca|esquece|esqueca)\W*$"
)
_DELETE: Final = _rx(
    r"^(?:(?:can you|could you|pode|voce pode) )?(?:please )?"
    rf"(?:{commands.ERASE_VERBS_EN}|drop|{commands.ERASE_VERBS_PT}|{commands.FORGET_VERBS_PT})"
    r"\b(?: (?:that|about|the fact that|que|de que|sobre|o fato de que))?[\s:,]*"
)
_UPDATE: Final = _rx(
    r"^(?:actually|correction|update|change|in fact|i meant|wait|no,? actually|not anymore|"
    r"na verdade|correcao|corrigindo|atualize|atualiza|mude|muda|altere|altera|"
    r"nao,? na verdade|pensando bem)\b(?: that| que)?[\s:,]*"
)
# "No, I live in Porto": a denial before a fact corrects what memory holds about it. The
# punctuation is required: "não gosto de…" is a negation, not a denial.
_DENIAL: Final = _rx(
    r"^(?:no|nope|wrong|that'?s (?:wrong|not right|not true)|that is (?:wrong|not right)|"
    r"nao|errado|isso (?:esta|e) errado|nao e isso)\s*[:,.!-]\s*"
)
_SAVE: Final = _rx(
    r"^(?:(?:can you|could you|would you|pode|voce pode) )?(?:please )?"
    r"(?:remember|note|keep in mind|don'?t forget|do not forget|save|store|write down|"
    r"memorize|take note|make a note|remind me to|lembre-se|lembre|lembra|anota|anote|guarde|"
    r"guarda|salve|salva|grave|memorize|nao esqueca|registre|registra|"
    r"(?<=pode )(?:lembrar|anotar|guardar|salvar|gravar|registrar))\b"
    r"(?: (?:that|this|down|of this|de que|que|isso|disso|o seguinte|this down))?[\s:,]*"
)
# "Can you remember that ...?" asks to save, question mark or not ("can you remember my
# passport number?" asks to recall: no "that").
_ASKED_TO_SAVE: Final = _rx(
    r"^(?:can|could|would) you (?:please )?(?:remember|note|save|write down|keep in mind) "
    r"(?:that|this)\b|^(?:voce )?pode (?:lembrar|anotar|guardar|salvar|gravar) (?:que|isso)\b"
)
# Thanks and greetings are the lead-in's (_COURTEOUS_TEXT): a message of nothing else is
# empty once it is read past them.
_SMALL_TALK: Final = _rx(
    r"^(?:how is it going|what's up|bye|goodbye|see you|como voce esta|tchau|ate logo)\b"
)
# "What can you do?", "o que você sabe fazer?", "help": what Memoria does without a model.
_CAPABILITIES: Final = _rx(
    r"^(?:who are you|who is (?:this|answering)|what are you|"
    r"what (?:else )?(?:can|do) you do|what are you (?:able|capable) (?:to do|of)|"
    r"how (?:can|do) you (?:help|work)|what can i (?:do|ask)(?: (?:here|you))?|help|"
    r"quem (?:e|esta) (?:voce|respondendo)|o que (?:e )?voce(?: e)?|"
    r"o que (?:mais )?(?:voce|vc) (?:pode fazer|faz|sabe fazer|consegue fazer)|"
    r"como (?:voce|vc) (?:pode )?(?:me )?(?:ajuda|ajudar|funciona)|ajuda)\W*$"
)
# What only a model can do: write, explain, translate, plan, advise, chat for its own sake.
# A polite frame before the verb is the request's ("can you", "pode", "me").
_CANNOT: Final = _rx(
    r"^(?:(?:can|could|would|will) you (?:please )?|please |i (?:want|need|would like) you "
    r"to |help me (?:to )?|(?:voce )?(?:pode|poderia|consegue|podes) (?:me )?|por favor,? |"
    r"(?:eu )?(?:quero|preciso) que (?:voce )?)?(?:me )?"
    r"(?:write|compose|draft|generate|create|make up|invent|explain|describe|define|"
    r"translate|summari[sz]e|rewrite|paraphrase|proofread|plan|organi[sz]e|recommend|"
    r"suggest|brainstorm|calculate|compute|solve|convert|code|program|debug|teach|sing|"
    r"give (?:me )?(?:some |a few )?(?:ideas|advice|tips|suggestions|a recipe|recipes|"
    r"an example|examples)|tell (?:me )?(?:a |another )?(?:joke|story|poem|fact about)|"
    r"chat|talk|let'?s (?:chat|talk)|"
    r"escreva|escreve|escrever|redija|redigir|componha|crie|cria|criar|gere|gera|gerar|"
    r"invente|explique|explica|explicar|descreva|descreve|defina|traduza|traduz|traduzir|"
    r"resuma|resume|resumir|reescreva|reescreve|revise|planeje|planeja|planejar|"
    r"organize|organiza|recomende|recomenda|recomendar|sugira|sugere|sugerir|calcule|"
    r"calcula|calcular|resolva|resolve|converta|programe|ensine|ensina|cante|canta|"
    r"de (?:umas? |algumas )?(?:ideias|dicas|conselhos?|sugestoes|receitas?|exemplos?)|"
    r"da (?:umas? |algumas )?(?:ideias|dicas|conselhos?|sugestoes|receitas?|exemplos?)|"
    r"conte (?:uma )?(?:piada|historia)|conta (?:uma )?(?:piada|historia)|"
    r"vamos conversar|conversa comigo|fala comigo|conversar)\b"
)
# Replies that answer nothing, even right after the planner asked for something.
_NO_ANSWER: Final = _rx(
    r"^(?:i don'?t know|i do not know|no idea|not sure|i forgot|dunno|idk|nao sei|sei la|"
    r"nao lembro|nao me lembro|esqueci|ok|okay|hm+|hmm+|ah|oh)\b"
)
_QUESTION_START: Final = _rx(
    r"^(?:what|whats|what's|when|where|who|whom|which|how|why|do you|did you|can you tell|"
    r"tell me|remind me|did i|have i|am i|do i|is my|are my|qual|quais|quando|onde|quem|como|"
    r"por que|porque|o que|oque|voce (?:lembra|sabe)|vc (?:lembra|sabe)|lembra (?:de|do|da|que|"
    r"qual|quando|onde|como|o)|me (?:diga|lembre|fala|diz)|sabe (?:qual|quando|onde|o))\b"
)
# "What did I tell you …", "o que eu te disse …": with a time after it, a question about
# what was told then.
_TOLD: Final = _rx(
    r"^(?:what (?:did|have) i (?:told|tell|said|say|mentioned|mention)(?: to)?(?: you)?|"
    r"o que (?:eu )?(?:te |lhe )?(?:disse|falei|contei|mencionei)"
    r"(?: (?:pra|para|a) (?:voce|vc|ti))?)\b[\s,]*"
)
_ABOUT_USER: Final = _rx(r"\b(?:my|me|i|mine|meu|minha|meus|minhas|eu|mim)\b")
# First-person facts worth keeping without an explicit "remember" (memory should be proactive).
# A subject may hold digits and hyphens ("my e-mail is", "my 2 kids are"); numbers are whole
# ("I'm 34", "tenho 34 anos"); life events count ("I moved to Porto", "me mudei").
_FACT: Final = _rx(
    r"^(?:my [a-z0-9'\- ]{1,40} (?:is|are|was)|i(?: am|'m| was) (?:allergic|a |an |from|vegan|"
    r"vegetarian|married|born|[0-9]+)|"
    r"i live|i work|i'?m learning|i have (?:a|an|two|three|[0-9]+)|i like|i love|i prefer|i hate|"
    r"i used to|i need to|i have to|i must|we (?:have|live|are|own|got|bought|adopted)|"
    r"i (?:broke up|adopted|lost|met|won)|"
    r"i(?: am|'m) (?:pregnant|engaged|single|divorced|retired|unemployed|widowed)|"
    r"i(?: am|'m) (?:not |really |so |very )?(?:a (?:big |huge )?fan of|into|crazy about|"
    r"obsessed with|afraid of|scared of|terrified of|good at|bad at|interested in|"
    r"used to|allergic)|i can'?t stand|"
    r"(?!(?:it|this|that|there|here|what|who|which|where)\b)[a-z]+ (?:is|was) my \w+|"
    r"i don'?t (?:like|eat|drink)|i can'?t (?:eat|drink|have)|i'?m planning|i plan|i want to|"
    r"i'?m going to|i'?m trying to|"
    r"i(?:'?ve| have)? (?:just |recently |finally )?(?:moved|started|got (?:married|divorced|"
    r"engaged|a|an)|graduated|retired|joined|bought|quit)|"
    r"i (?:drive|own|speak|study|use|play)|"
    r"my (?:wife|husband|partner|son|daughter|kids?|children|mother|mom|mum|father|dad|parents|"
    r"brother|sister|boyfriend|girlfriend|fiancee?|dog|cat|pet|best friend|grandmother|"
    r"grandfather|grandma|grandpa|boss|baby)(?:'s)? \w+|"
    r"(?!(?:it|that|what|there|here|who|where|how|he|she|let)'s)[a-z]+'s [a-z0-9'\- ]{1,40} "
    r"(?:is|are|was)|"
    r"meu [a-z0-9\- ]{1,40} (?:e|era|sao)|minha [a-z0-9\- ]{1,40} (?:e|era|sao)|"
    r"meus [a-z0-9\- ]{1,40} sao|minhas [a-z0-9\- ]{1,40} sao|"
    r"(?:meu|minha|meus|minhas) (?:esposa|marido|parceir[oa]|filh[oa]s?|mae|pai|pais|irmas?|"
    r"irmaos?|namorad[oa]|noiv[oa]|cachorr[oa]|gat[oa]|chefe|avo|bebe|melhor amig[oa]) \w+|"
    r"(?:eu )?me chamo|eu (?:sou|moro|trabalho|tenho|gosto|"
    r"adoro|prefiro|odeio|nao gosto|nao como|nao bebo|nao posso|estou planejando|quero|pretendo|"
    r"vou)|(?:eu )?(?:me )?(?:mudei|comecei|casei|formei|aposentei|comprei|nasci|cresci|"
    r"estudei|morei|trabalhei|troquei|perdi|ganhei|adotei|terminei|conheci)|"
    r"(?:eu )?nao (?:sou|tenho|uso|fumo|dirijo|falo|gosto|como|bebo|posso|suporto|tolero)|"
    r"(?:eu )?tenho (?:medo|pavor|fobia|alergia|intolerancia) (?:de|a)|"
    r"sou (?!eu\b)[a-z]+|"  # "sou alérgica", "sou o Marco", "sou médico"; not "sou eu"
    r"(?:eu )?(?:dirijo|falo|estudo|uso|toco)|moro (?:em|no|na)|"
    r"trabalho (?:como|em|na|no)|estou (?:planejando|tentando|pensando em|aprendendo|"
    r"gravida|noiv[oa]|casad[oa]|solteir[oa]|desempregad[oa]|aposentad[oa]|estudando|"
    r"trabalhando|morando)|"
    r"tenho (?:um|uma|dois|duas|[0-9]+)|gosto de|adoro|prefiro|odeio)\b"
)

# What _FACT's forms miss: "I drink coffee every morning", "I usually cycle to work", "My
# coffee: black, no sugar", "Costumo correr de manhã". Any first-person verb with something
# after it, but those of conversation ("I think so", "I see", "I love you", "I know"), which
# say nothing worth keeping.
_EVERYDAY_FACT: Final = _rx(
    r"^(?:i (?:usually |always |often |never |sometimes |normally |rarely |also |still )?"
    rf"(?!(?:{'|'.join(lexicon.CONVERSATION_VERBS)})\b)[a-z]+ "
    rf"(?!(?:{'|'.join(lexicon.CONVERSATION_OBJECTS)})\b)[a-z0-9]"
    r"|(?:my|meu|minha|meus|minhas) [a-z0-9'\- ]{1,40}: *[^\s:]"
    r"|(?:eu )?(?:sempre |geralmente |normalmente |costumo )?"
    rf"(?:{'|'.join(lexicon.EVERYDAY_VERBS_PT)}) [a-z0-9])"
)
# What a statement may say before its subject: a time, a place, a connective ("Yesterday I
# went ...", "On Fridays I play ...", "In Lisbon I work ...", "Na semana passada comecei
# ..."). Read past it, the rest says whether the message is a fact; the fact kept is the
# whole message, its time included.
_EN_CONTEXT: Final = (
    r"(?:and|so|but|also|then|well|anyway|besides|btw|by the way|oh|actually not|"
    r"honestly|plus|recently|lately|finally|usually|sometimes|nowadays|now|these days|today|"
    r"tonight|"
    r"yesterday|tomorrow|this (?:morning|afternoon|evening|week|month|year|weekend|summer|"
    r"winter|spring|autumn|fall)|last (?:night|week|month|year|weekend|summer|winter|"
    r"spring|autumn|fall|time|[a-z]+day)|next (?:week|month|year|weekend|[a-z]+day)|"
    r"(?:a|one|two|three|four|five|six|a few|several|[0-9]+) (?:days?|weeks?|months?|"
    r"years?) ago|on (?:the )?(?:[a-z]+days?|weekends|weekdays|the weekend|[0-9]+(?:st|nd|"
    r"rd|th)?)(?: (?:mornings?|afternoons?|evenings?|nights?))?|"
    r"every (?:day|morning|evening|night|week|month|year|weekend|[a-z]+day)"
    r"(?: (?:morning|afternoon|evening|night))?|"
    r"each (?:day|morning|week|[a-z]+day)|in the (?:morning|afternoon|evening|summer|"
    r"winter)|at (?:night|work|home|school|the weekend)|after (?:work|school|lunch|dinner)|"
    r"before (?:work|school|bed)|when i was (?:a )?(?:kid|child|young|little|[0-9]+)|"
    r"as a (?:kid|child)|since [a-z0-9]+|"
    r"(?:in|at|from) [a-z0-9'-]+(?: (?!(?:i|we|my|our)\b)[a-z0-9'-]+)?)"
)
_PT_CONTEXT: Final = (
    r"(?:e|entao|tambem|alias|enfim|ah|bom|olha|hoje|ontem|anteontem|amanha|agora|"
    r"recentemente|ultimamente|finalmente|geralmente|normalmente|as vezes|hoje de manha|"
    r"hoje a (?:tarde|noite)|(?:na |nesta |esta )?semana (?:passada|que vem)|"
    r"(?:no |neste |este )?(?:mes|ano|fim de semana) (?:passado|que vem)|"
    r"ha (?:um|uma|dois|duas|tres|alguns|algumas|[0-9]+) (?:dias?|semanas?|meses|mes|"
    r"anos?)|faz (?:um|uma|dois|duas|tres|alguns|algumas|[0-9]+) (?:dias?|semanas?|meses|"
    r"mes|anos?)|(?:na|no|nas|nos|as|aos|toda|todo|todas|todos|todos os|todas as|cada) "
    r"(?:[a-z]+-feiras?|segundas?|tercas?|quartas?|quintas?|sextas?|sabados?|domingos?|"
    r"dias?|manhas?|noites?|tardes?|semanas?|fins de semana|fim de semana)|de manha|"
    r"a noite|a tarde|depois do trabalho|quando (?:eu )?era (?:crianca|pequen[oa]|nov[oa])|"
    r"(?:em|no|na|de) [a-z0-9'-]+(?: (?!eu\b)[a-z0-9'-]+)?)"
)
_CONTEXT_FIRST: Final = _rx(rf"^(?:{_EN_CONTEXT}|{_PT_CONTEXT})(?:\s*,\s*|\s+)(?=\S)")
# The same with a place of one word only ("Em Lisboa trabalho ...", where the greedy form
# takes "Em Lisboa trabalho" for the place).
_CONTEXT_FIRST_SHORT: Final = _rx(
    _CONTEXT_FIRST.pattern.replace("[a-z0-9'-]+)?)", "[a-z0-9'-]+)??)")
)
_EN_SUBJECT: Final = _rx(r"^(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our)\b")
# "I drink tea now", "now I work from home", "agora bebo chá": a fact that replaces what
# memory holds about its subject, like a move.
_NOW: Final = _rx(
    r"^(?:now|nowadays|these days|agora|hoje em dia|atualmente),? |"
    r" (?:now|nowadays|these days|instead|agora|hoje em dia|atualmente)$"
)
_MAX_CONTEXTS: Final = 3
# Something of the user's named inside the subject: "The name of my dog is Rex", "O
# aniversário do meu pai é dia 3 de maio".
_POSSESSED: Final = _rx(
    r"^(?:the|o|a|os|as) [a-z0-9'\- ]{1,40}? (?:of my|of our|do meu|da minha|dos meus|"
    r"das minhas|de meu|de minha|do nosso|da nossa) [a-z0-9'\- ]{1,40}? "
    r"(?:is|are|was|were|e|era|sao|foi|fica|cai)\b"
)
# Portuguese "we" in the verb: "Vamos viajar para o Chile", "Moramos em Braga".
_PT_WE: Final = _rx(
    r"^(?:nos )?(?!vamos (?:ver|la|nessa|embora|conversar|falar)\b)"
    r"(?:vamos|fomos|estamos|somos|temos|tivemos|[a-z]{3,}(?:amos|emos|imos)) [a-z0-9]"
)
# What the user has or is, said without an article: "I have asthma", "I'm lactose
# intolerant", "I've been working at Siemens since 2018".
_HAS: Final = _rx(
    r"^(?:i|we) have (?!(?:to|no|nothing|been|got|a lot|an idea|fun|time|enough|it|that|"
    r"this|them|one|some|any|you)\b)[a-z]|"
    r"^i(?:'m| am) (?:[a-z]+ )?(?:intolerant|diabetic|asthmatic|epileptic|celiac|coeliac|"
    r"colou?r ?blind|left-handed|right-handed|deaf|blind|hypertensive|an(?:a)?emic|"
    r"autistic|dyslexic|lactose|gluten)\b|"
    r"^(?:i|we)(?:'ve| have) been (?:[a-z]+ing|married|divorced|together|vegan|vegetarian|"
    r"sober|a |an )"
)
# Something or someone of the user's doing something: "My nephew Tiago is studying", "My
# flight to Lisbon leaves on the 20th", "Minha sobrinha Clara mora em Recife", "Meu voo sai
# dia 20".
_THEIRS: Final = _rx(
    r"^(?:my|our) [a-z0-9'\- ]{1,40}? (?:lives|works|studies|has|leaves|starts|ends|plays|"
    r"goes|comes|turns|costs|arrives|departs|begins|runs|opens|closes|takes|teaches|drives|"
    r"loves|likes|hates|speaks|got|had|went|moved|died|passed|retired|graduated)\b|"
    r"^(?:meu|minha|meus|minhas|nosso|nossa) [a-z0-9'\- ]{1,40}? (?:mora|moram|trabalha|"
    r"trabalham|estuda|estudam|tem|faz|fazem|gosta|joga|toca|vive|nasceu|se chama|chama|"
    r"esta|vai|fica|sai|chega|comeca|termina|custa|vence|parte|dirige|fala|ensina|"
    r"morreu|faleceu|casou|mudou|formou|aposentou)\b"
)
# What happened to the user: "I had knee surgery in 2019", "I had a baby in May".
_HAD: Final = _rx(
    r"^(?:i|we) had (?!(?:no|to|it|that|this|fun|enough|a (?:good|great|nice|bad) "
    r"(?:time|day|night))\b)[a-z0-9]"
)
# Plans and what is under way: "We're going to Japan in April", "I'm training for a marathon".
_UNDER_WAY: Final = _rx(
    r"^(?:i'?m|i am|we'?re|we are) (?:not )?(?:going|planning|moving|travell?ing|flying|"
    r"visiting|starting|getting|having|expecting|training|learning|taking|working|studying|"
    r"staying|leaving|coming|driving|buying|selling|renting|building|preparing|saving|"
    r"organi[sz]ing|celebrating|hosting|attending|running|doing|writing|reading|seeing|"
    r"dating|living)\b"
)
_WE_FACT: Final = _rx(
    rf"^we (?:usually |always |often |never |sometimes |also |still )?"
    rf"(?!(?:{'|'.join(lexicon.CONVERSATION_VERBS)})\b)[a-z]+ "
    rf"(?!(?:{'|'.join(lexicon.CONVERSATION_OBJECTS)})\b)[a-z0-9]"
)
_CONVERSATION_PT: Final = _rx(
    r"^(?:eu )?(?:acho|sei|entendo|entendi|concordo|lembro|esqueci|digo|disse|falei|"
    r"perguntei|pergunto|suponho|imagino|espero|quis dizer|quero dizer|vi que|vejo que)\b"
)
_FIRST_WORD: Final = _rx(r"^(?:eu )?(?:nao |tambem |ja |sempre |nunca |ainda )?(?P<verb>[a-z]+) \S")

# Said to the assistant, not about the user: never a fact, whatever the forms above say.
_CHATTER: Final = _rx(
    r"^(?:i (?:love|like|hate|miss|need) you|my bad|te amo|amo voce|"
    r"(?:eu )?nao tenho (?:certeza|ideia|tempo)|(?:nao )?sou eu)\b"
)

# A fact that replaces one memory holds: a move, something no longer true. Like a correction,
# it changes the memory about its subject when one is found and is saved when none is.
_CHANGED: Final = _rx(
    r"^(?:i(?:'?ve| have)? (?:just |recently |finally )?moved (?:to|into|back to)|"
    r"i(?:'m| am)? no longer|i(?:'m| am) not [a-z' ]{1,40} any ?more|"
    r"i (?:don'?t|do not) [a-z' ]{1,40} any ?more|"
    r"(?:eu )?(?:me )?mudei (?:para|pra)|(?:eu )?nao (?:sou|moro|trabalho|tenho|gosto) mais|"
    r"(?:eu )?ja nao|agora (?:eu )?(?:moro|trabalho|sou))\b"
)
# "Not coffee, tea", "não café, e sim chá": what is wrong, then what is right.
_NOT_OLD_BUT_NEW: Final = _rx(
    r"^(?:not|nao) (?P<old>[^,;.!?]{1,30}?)(?:\s*[,;]\s*(?:but |mas |e sim |sim )?|"
    r" (?:but|mas|e sim) )(?P<new>[^,;.!?]{1,40}?)[\s.!]*$"
)
# "Tea, not coffee", "Minha irmã se chama Rita, não Rute": what is right, then what is wrong.
_NEW_NOT_OLD: Final = _rx(
    r"^(?P<new>[^;!?]{1,200}?)\s*[,;]\s*(?:and |e )?(?:not|nao) (?P<old>[^,;.!?]{1,30}?)[\s.!]*$"
)
_MAX_VALUE_WORDS: Final = 4
"""A new value given alone ("tea", "green tea") is short; longer words are a statement."""

# Where a message joins facts of its own: "I'm Marco and I live in Berlin", "Sou a Ana, moro
# no Porto". A clause must start with its own subject, so "I like tea and coffee" stays one.
_CLAUSE_BREAK: Final = _rx(
    r"\s*(?:[,;.]\s*(?:(?:and|but|e|mas) )?|\s(?:and|but|e|mas) )"
    r"(?=(?:i|we|eu|moro|trabalho|tenho|sou|gosto|estou|adoro|amo|prefiro|odeio|falo|estudo|"
    r"nao (?:gosto|como|bebo|posso))\b|"
    r"(?:my|meu|minha|meus|minhas) [a-z0-9'\- ]{1,40} (?:is|are|was|e|era|sao)\b)"
)


def read(message: str) -> Reading:
    """The intent of one user message."""
    reading = _read(message)
    if reading.intent != Intent.SAVE:
        return reading
    return Reading(reading.intent, reading.statement, facts=_facts_in(reading.statement))


def _past_context(text: str) -> str:
    """``text`` (folded) without the time, place or connective it opens with, when a
    statement follows them ("yesterday i went ..." → "i went ...")."""
    for _ in range(_MAX_CONTEXTS):
        rests = [
            text[m.end() :] for p in (_CONTEXT_FIRST, _CONTEXT_FIRST_SHORT) if (m := p.match(text))
        ]
        rest = next((r for r in rests if _statement_follows(r)), None)
        if rest is None:
            break
        text = rest
    return text


def _statement_follows(rest: str) -> bool:
    return bool(
        _EN_SUBJECT.match(rest)
        or _CONTEXT_FIRST.match(rest)
        or _pt_statement(rest)
        or _PT_WE.match(rest)
    )


def _pt_statement(text: str) -> bool:
    """A Portuguese first-person verb with something after it ("fui ao dentista", "não
    como carne"): the subject is in the verb."""
    first = _FIRST_WORD.match(text)
    return (
        first is not None
        and not _CONVERSATION_PT.match(text)
        and first.group("verb") not in lexicon.NOT_PT_VERBS
        and first_person_verb(first.group("verb")) is not None
    )


def _is_fact(text: str) -> bool:
    """A first-person statement (folded) worth keeping."""
    return bool(
        _FACT.match(text)
        or _UNDER_WAY.match(text)
        or _HAD.match(text)
        or _HAS.match(text)
        or _THEIRS.match(text)
        or _POSSESSED.match(text)
        or _PT_WE.match(text)
        or _EVERYDAY_FACT.match(text)
        or _WE_FACT.match(text)
        or (_pt_statement(text) and not _QUESTION_START.match(text))
    )


def _courtesy(folded: str) -> tuple[str, ...]:
    marks = (("thanks", _THANKS), ("bye", _BYE))
    return tuple(name for name, pattern in marks if pattern.search(folded))


def _facts_in(statement: str) -> tuple[str, ...]:
    folded = Folded.of(statement)
    clauses: list[str] = []
    begin = 0
    for cut in _CLAUSE_BREAK.finditer(folded.text):
        if cut.start() > begin:
            clauses.append(tidy(folded.original_between(begin, cut.start())))
            begin = cut.end()
    clauses.append(tidy(folded.original_from(begin)))
    if len(clauses) > 1 and all(_read(clause).intent == Intent.SAVE for clause in clauses):
        return tuple(clauses)
    return (statement,)


def _corrected(statement: str) -> Reading | None:
    """A correction that names what is wrong ("not coffee, tea", "I drink tea, not
    coffee"), or None. A fact before the "not" is the new fact; a few words alone are the
    new value, put in place of the old in the memory that holds it."""
    folded = Folded.of(statement)
    match = _NOT_OLD_BUT_NEW.match(folded.text) or _NEW_NOT_OLD.match(folded.text)
    if match is None:
        return None
    new = strip_edges(folded.original_between(match.start("new"), match.end("new")))
    old = strip_edges(folded.original_between(match.start("old"), match.end("old")))
    if not new or not old:
        return None
    if _read(new).intent in (Intent.SAVE, Intent.UPDATE):
        # If nothing holds the old value, the whole statement is what is saved.
        return Reading(Intent.UPDATE, tidy(new), facts=(tidy(statement),), old_value=old)
    said = fold(f"{old} {new}").split()
    if _COURTEOUS.search(fold(new)) or any(word in lexicon.NOT_VALUES for word in said):
        return None  # "not bad, thanks", "not now, later": conversation, not a correction
    if len(new.split()) <= _MAX_VALUE_WORDS:
        return Reading(Intent.UPDATE, new, old_value=old, substitution=True)
    return None


def _read(message: str) -> Reading:
    folded = Folded.of(message)
    lead = _LEAD_IN.match(folded.text)
    start = lead.end() if lead else 0
    text = folded.text[start:]
    whole = tidy(folded.original_from(start)) or tidy(message)
    question = is_question(message)

    def after(pattern: re.Pattern[str]) -> str | None:
        match = pattern.match(text)
        if match is None:
            return None
        return tidy(folded.original_from(start + match.end()))

    if _DELETE_ALL.search(text):
        return Reading(Intent.DELETE_ALL, whole)
    if _CONFIRM.match(text) and not question:
        return Reading(Intent.CONFIRM, whole)
    if _CANCEL.match(text):
        return Reading(Intent.CANCEL, whole)
    if _LIST_ALL.search(text):
        return Reading(Intent.LIST_ALL, whole)
    if _FORGET_THAT.match(text):
        return Reading(Intent.DELETE, whole, refers_back=True)
    if (rest := after(_DELETE)) is not None and rest:
        return Reading(Intent.DELETE, rest)
    if (rest := after(_UPDATE)) is not None and rest:
        return _corrected(rest) or Reading(Intent.UPDATE, rest)
    denied = after(_DENIAL)
    if denied and not question and (inner := _read(denied)).intent == Intent.UPDATE:
        return inner
    if denied and not question and inner.intent == Intent.SAVE:
        return Reading(Intent.UPDATE, denied)
    if not question and (correction := _corrected(strip_edges(folded.original_from(start)))):
        return correction
    if (rest := after(_SAVE)) is not None and rest and (not question or _ASKED_TO_SAVE.match(text)):
        return Reading(Intent.SAVE, tidy(rest.rstrip("?")))
    if _CAPABILITIES.match(text):
        return Reading(Intent.CAPABILITIES, whole)
    if _CANNOT.match(text):
        return Reading(Intent.CANNOT, whole)
    if not text or _SMALL_TALK.match(text):
        return Reading(Intent.SMALL_TALK, whole, courtesy=_courtesy(folded.text))
    told = after(_TOLD)
    if told is not None and find_relative_dates(told, NAMES_A_TIME):
        # Listed like "what do you know about me", within the time (plans.py).
        return Reading(Intent.LIST_ALL, whole, told_when=told)
    if question or _QUESTION_START.match(text):
        return Reading(Intent.SEARCH, whole, about_user=bool(_ABOUT_USER.search(text)))
    core = _past_context(text)
    if _CHANGED.match(core) or (_NOW.search(text.rstrip(" .!")) and _is_fact(core)):
        return Reading(Intent.UPDATE, whole)
    if _CHATTER.match(core):
        return Reading(Intent.SMALL_TALK, whole)
    if _is_fact(core) or introduces(whole):
        return Reading(Intent.SAVE, whole)
    if _NO_ANSWER.match(text):
        return Reading(Intent.SMALL_TALK, whole)
    if _COURTEOUS.search(folded.text[:start]):
        return Reading(Intent.SMALL_TALK, tidy(message), courtesy=_courtesy(folded.text))
    # Kept as typed: it may become the end of a statement ("in Porto").
    return Reading(Intent.SMALL_TALK, strip_edges(folded.original_from(start)), unread=True)
