"""Word lists the offline planner's rules read: data, kept apart from the rules so that
adding a word is not editing a regular expression. Folded (lower case, no accents) unless
said otherwise; a few end in a regex class ("engenheir[oa]") to cover both genders."""

from __future__ import annotations

from typing import Final


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


OCCUPATIONS: Final = _words(
    "engineer developer programmer coder teacher professor lecturer tutor nurse doctor "
    "physician surgeon paramedic lawyer attorney designer accountant architect student "
    "manager chef cook baker barista waiter waitress driver pilot pharmacist dentist "
    "scientist researcher writer journalist editor artist musician photographer consultant "
    "analyst mechanic electrician plumber carpenter farmer firefighter officer cashier "
    "salesman saleswoman clerk secretary receptionist librarian translator therapist "
    "psychologist vet veterinarian economist banker technician intern freelancer "
    "entrepreneur retired unemployed "
    "engenheir[oa] desenvolvedora? programadora? professora? enfermeir[oa] medic[oa] "
    "cirurgiao? advogad[oa] contadora? arquitet[oa] estudante gerente cozinheir[oa] "
    "padeir[oa] garcom garconete motorista piloto farmaceutic[oa] dentista cientista "
    "pesquisadora? escritora? jornalista editora? artista music[oa] fotograf[oa] "
    "consultora? analista mecanic[oa] eletricista encanadora? carpinteir[oa] "
    "agricultora? bombeir[oa] policial vendedora? secretari[oa] recepcionista "
    "bibliotecari[oa] tradutora? terapeuta psicolog[oa] veterinari[oa] economista "
    "bancari[oa] tecnic[oa] estagiari[oa] empresari[oa] aposentad[oa] desempregad[oa]"
)
"""What the user may say they are ("I'm a nurse", "sou professora"): the job topic."""

NOT_NAMES: Final = frozenset(
    _words(
        "Fine Ok Okay Good Great Sorry Here Back Done Ready Not So Just Sure Glad Happy Tired "
        "Busy Still Also Very Really Bem Aqui "
        # Nationalities and faiths people state the same way ("I'm Brazilian").
        "American Argentinian Australian Austrian Belgian Brazilian British Canadian Chilean "
        "Chinese Colombian Cuban Danish Dutch Egyptian English Finnish French German Greek "
        "Indian Irish Italian Japanese Jewish Korean Mexican Moroccan Muslim Nigerian Norwegian "
        "Peruvian Polish Portuguese Russian Scottish Spanish Swedish Swiss Turkish Ukrainian "
        "Venezuelan Vegan Vegetarian Catholic Buddhist Hindu Brasileiro Brasileira Portugues "
        "Portuguesa"
    )
)
"""Capitalised words that follow "I'm" without being the user's name (as typed, not folded)."""

CONVERSATION_VERBS: Final = _words(
    "think guess see know mean wonder hope feel suppose agree disagree understand forgot "
    "remember believe bet doubt said say told tell asked ask wish meant get got just was were "
    "am will would could should can did do does don't dont didn't didnt have had haven't "
    "need want thought heard saw appreciate apologize apologise promise"
)
"""First-person verbs of conversation ("I think so", "I see"), never a fact to keep."""

CONVERSATION_OBJECTS: Final = _words("you it that this so too them him her one")
"""Objects that make a first-person sentence talk to the assistant ("I love you")."""

EVERYDAY_VERBS_PT: Final = _words(
    "bebo corro leio assisto acordo durmo tomo ando cozinho pratico jogo escuto ouco visito "
    "viajo nado pedalo coleciono torco sigo faco costumo dou"
)
"""Portuguese first-person verbs of habits ("bebo chá verde", "costumo correr"): a fact to
keep. Portuguese drops the "eu", so a verb list stands where English has "I <verb>"."""

PREDICATE_FAMILIES: Final = (
    (
        "drink drinks drinking bebo bebe beber tomo",
        "I drink coffee, tea, juice, beer or wine",
        "bebo café, chá, água, suco, cerveja ou vinho",
    ),
    (
        "eat eats eating como comer",
        "I eat meat, fish, vegetables, fruit or sweets",
        "como carne, peixe, legumes, frutas ou doces",
    ),
    (
        "play plays playing jogo jogar toco tocar",
        "I play football, tennis, guitar or piano",
        "jogo futebol ou tênis, toco violão ou piano",
    ),
    (
        "drive drives driving dirijo",
        "I drive a car, a motorbike or a van",
        "dirijo carro, moto ou van",
    ),
    (
        "speak speaks speaking falo",
        "I speak English, Portuguese, Spanish or French",
        "falo inglês, português, espanhol ou francês",
    ),
)
"""First-person verbs (folded) and the family of things they take, as one query each in
English and Portuguese: "actually, I drink tea" is about what the user drinks, and a search
for that family finds "I drink coffee every morning" where a search for tea would not."""

NOT_VALUES: Final = _words(
    "bad good great sure really now yet today tonight tomorrow exactly quite much at all so "
    "too that this it me you one again always never anymore right there here mal bem agora "
    "ainda hoje amanha exatamente muito tanto isso isto eu voce sempre nunca mais certo ai aqui"
)
"""Words of conversation, never a value a correction replaces ("not bad, thanks", "not now,
later", "não agora, obrigado")."""

PT_IRREGULAR_VERBS: Final = {
    # present
    "sou": "é",
    "estou": "está",
    "tenho": "tem",
    "vou": "vai",
    "faco": "faz",
    "posso": "pode",
    "quero": "quer",
    "sei": "sabe",
    "digo": "diz",
    "vejo": "vê",
    "venho": "vem",
    "ponho": "põe",
    "trago": "traz",
    "dou": "dá",
    "leio": "lê",
    "creio": "crê",
    "odeio": "odeia",
    "prefiro": "prefere",
    "sinto": "sente",
    "minto": "mente",
    "durmo": "dorme",
    "sigo": "segue",
    "consigo": "consegue",
    "persigo": "persegue",
    "peco": "pede",
    "meco": "mede",
    "ouco": "ouve",
    "perco": "perde",
    "visto": "veste",
    "sirvo": "serve",
    "subo": "sobe",
    "fujo": "foge",
    "dirijo": "dirige",
    "corrijo": "corrige",
    "exijo": "exige",
    "caibo": "cabe",
    "valho": "vale",
    "saio": "sai",
    "caio": "cai",
    "rio": "ri",
    "passeio": "passeia",
    "anseio": "anseia",
    "conheco": "conhece",
    "pareco": "parece",
    "ofereco": "oferece",
    "agradeco": "agradece",
    "esqueco": "esquece",
    "aqueco": "aquece",
    "cresco": "cresce",
    "nasco": "nasce",
    "torco": "torce",
    "descubro": "descobre",
    "cubro": "cobre",
    "tusso": "tosse",
    "construo": "constrói",
    "destruo": "destrói",
    "possuo": "possui",
    "influo": "influi",
    # preterite
    "fui": "foi",
    "fiz": "fez",
    "tive": "teve",
    "estive": "esteve",
    "pude": "pôde",
    "quis": "quis",
    "disse": "disse",
    "vi": "viu",
    "vim": "veio",
    "pus": "pôs",
    "trouxe": "trouxe",
    "dei": "deu",
    "soube": "soube",
    "li": "leu",
    "sai": "saiu",
    "cai": "caiu",
    "construi": "construiu",
    "possui": "possuiu",
    "fugi": "fugiu",
    # imperfect and future-ish forms the same in both persons are left as they are
}
"""First-person singular verbs (folded) whose third person (as "você" takes it) no rule
makes: present and preterite."""

PT_AR_VERBS: Final = frozenset(
    _words(
        """
    morar trabalhar gostar adorar amar jogar tocar andar acordar tomar falar estudar usar
    costumar praticar cozinhar nadar pedalar viajar visitar escutar fumar treinar chamar levar
    pegar comprar pagar mudar casar comecar terminar acabar ficar chegar voltar entrar ganhar
    cuidar ajudar ensinar lecionar dancar cantar desenhar pintar fotografar caminhar malhar
    alugar trocar adotar formar aposentar criar plantar colecionar frequentar participar
    organizar planejar pensar precisar esperar tentar deixar marcar agendar levantar deitar
    almocar jantar lanchar preparar separar guardar lembrar achar encontrar namorar noivar
    divorciar gastar economizar cancelar reservar operar consultar tratar medicar vacinar
    engravidar mandar enviar ligar conversar passar parar votar mergulhar surfar patinar
    escalar pescar acampar velejar remar lutar meditar rezar orar brincar buscar educar
    alimentar atuar atender cobrar emprestar quebrar machucar internar curar melhorar piorar
    engordar pesar completar celebrar comemorar festejar convidar hospedar gravar filmar
    programar projetar administrar gerenciar coordenar liderar chefiar abandonar largar
        """
    )
)
"""Portuguese -ar verbs (folded infinitives) whose first person the rules may conjugate."""

PT_ER_VERBS: Final = frozenset(
    _words(
        """
    beber comer correr viver aprender vender receber escrever perder conhecer parecer
    oferecer agradecer esquecer crescer nascer torcer dever emagrecer entender responder
    escolher resolver desenvolver mexer meter prometer sofrer varrer morrer bater comprometer
        """
    )
)
"""Portuguese -er verbs (folded infinitives)."""

PT_IR_VERBS: Final = frozenset(
    _words(
        """
    partir abrir decidir assistir sentir dormir seguir pedir ouvir subir descobrir conseguir
    desistir preferir dividir cumprir vestir sorrir fugir dirigir insistir resistir existir
    permitir curtir exigir proibir investir servir mentir repetir competir discutir
    consumir assumir resumir admitir omitir transmitir garantir unir reunir dirigir sair
        """
    )
)
"""Portuguese -ir verbs (folded infinitives)."""

NOT_PT_VERBS: Final = frozenset(_words("como sei vi li dei sai cai rio"))
"""First-person verb forms (folded) that also open other sentences ("como" is "how", "rio"
a river): never read alone as the start of a statement."""
